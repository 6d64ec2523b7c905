"""Knowledge clusters: groups of related memories, the raw material of skills."""

from ultron.clusters.service import ClusteringReport, ClusterService

__all__ = ["ClusterService", "ClusteringReport"]
