from metrics.running import Running, snapshot

__all__ = ["Running", "snapshot"]
