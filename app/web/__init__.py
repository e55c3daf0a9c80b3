"""The web process: HTML dashboard, JSON API, SSE, /metrics and /healthz."""
