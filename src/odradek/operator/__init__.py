"""Odradek's Kubernetes operator, in Strimzi's model.

The sans-I/O core turns the custom resources (OdradekCluster, OdradekTopic, OdradekUser and
OdradekRebalance, declared in `crds`) into the Kubernetes objects and cluster actions that realise them;
kopf handlers around that core will do the I/O.
"""
