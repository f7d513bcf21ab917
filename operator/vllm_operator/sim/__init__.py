"""The vLLM 0.33 twin: a pure engine model (`engine`), a virtual-time fleet runner (`fleet`,
`runner`, `workload`, `report`), profiles as data (`profiles/`, `catalog`), and the real-time
HTTP server around the same engine (`server`)."""
