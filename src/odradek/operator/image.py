"""The Odradek container image: its name, and where the node's command, configuration and data live in it."""

from importlib.metadata import version as package_version

IMAGE_REPOSITORY = "odradek/odradek"
CONFIG_PATH = "/etc/odradek/server.properties"
DATA_PATH = "/var/lib/odradek/data"
# The image's ENTRYPOINT is `odradek` and its CMD the rest: the Dockerfile and the rendered Pods run this.
NODE_COMMAND = ["odradek", "server", "--config", CONFIG_PATH]


def image(version: str | None = None) -> str:
    """The image reference of an Odradek version; by default this installed package's version."""
    return f"{IMAGE_REPOSITORY}:{version or package_version('odradek')}"
