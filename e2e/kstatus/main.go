// kstatus reads Kubernetes objects as JSON (one per line) on stdin and prints, per object, the
// status that sigs.k8s.io/cli-utils' kstatus computes: the library Flux's `wait: true`,
// `kubectl`-adjacent tools and Config Sync use to decide whether a resource is Current.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
)

type result struct {
	Status  string `json:"status"`
	Message string `json:"message"`
	Error   string `json:"error,omitempty"`
}

func main() {
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 0, 1<<20), 16<<20)
	out := json.NewEncoder(os.Stdout)
	for in.Scan() {
		obj := &unstructured.Unstructured{}
		// UnmarshalJSON keeps integers as int64, which kstatus' accessors require
		if err := obj.UnmarshalJSON(in.Bytes()); err != nil {
			fmt.Fprintln(os.Stderr, "kstatus: not a Kubernetes object:", err)
			os.Exit(2)
		}
		res, err := status.Compute(obj)
		r := result{}
		if err != nil {
			r.Error = err.Error()
		} else {
			r.Status, r.Message = res.Status.String(), res.Message
		}
		if err := out.Encode(r); err != nil {
			os.Exit(1)
		}
	}
	if err := in.Err(); err != nil {
		fmt.Fprintln(os.Stderr, "kstatus:", err)
		os.Exit(2)
	}
}
