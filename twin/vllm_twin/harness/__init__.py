"""Test harness that plays the kubelet's part for vLLM pods on kwok nodes.

kwok marks pods Running but runs no container. For each Running pod of a VLLMService this harness
starts a vLLM twin on 127.0.0.1 with that pod's own container args, registers it with Prometheus
through file-based service discovery (labelled as a PodMonitor would label it), and puts a
loopback load balancer in front of each VLLMService's twins. It never connects to pod IPs.
"""
