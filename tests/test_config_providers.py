"""Kafka's config providers (KIP-297) in a node's configuration: Kafka 4.0's file, directory and environment
providers and its substitution rules, on an in-memory file system; then a real node whose broker.rack comes
from a file, as a client sees it."""

from __future__ import annotations

import posixpath

import pytest
from confluent_kafka.admin import AdminClient

from odradek.config import BrokerConfig, ConfigError
from odradek.config_providers import (
    DIRECTORY_PROVIDER,
    ENV_VAR_PROVIDER,
    FILE_PROVIDER,
    ConfigProviders,
)


class MemoryFiles:
    """Files on a dict: path -> content; a directory exists when a file is under it."""

    def __init__(self, files: dict[str, str]) -> None:
        self.files = files
        self.read: list[str] = []

    def exists(self, path: str) -> bool:
        return path in self.files or self.is_dir(path)

    def is_dir(self, path: str) -> bool:
        return any(name.startswith(path.rstrip("/") + "/") for name in self.files)

    def regular_files(self, directory: str) -> set[str]:
        return {posixpath.basename(name) for name in self.files if posixpath.dirname(name) == directory.rstrip("/")}

    def read_text(self, path: str) -> str:
        self.read.append(path)
        if path not in self.files:
            raise FileNotFoundError(path)
        return self.files[path]


FILES = {"/etc/secrets/db.properties": "user=admin\npassword=s3cret\n",
         "/run/init/rack.id": "eu-west-1a",
         "/run/init/with-newline": "line\n"}
ENVIRON = {"BROKER_RACK": "zone-b", "HOME": "/home/odradek"}


def resolve(settings: dict[str, str], files: dict[str, str] = FILES, environ: dict[str, str] = ENVIRON):
    return ConfigProviders(settings, MemoryFiles(files), environ).resolve(settings)


ALL_THREE = {"config.providers": "file,dir,env", "config.providers.file.class": FILE_PROVIDER,
             "config.providers.dir.class": DIRECTORY_PROVIDER, "config.providers.env.class": ENV_VAR_PROVIDER}


def test_each_builtin_provider_replaces_its_references():
    resolved, warnings = resolve(ALL_THREE | {
        "sasl.jaas.config": 'x username="${file:/etc/secrets/db.properties:user}" '
                            'password="${file:/etc/secrets/db.properties:password}";',
        "broker.rack": "${dir:/run/init:rack.id}",
        "client.rack": "${env:BROKER_RACK}"})
    assert resolved["sasl.jaas.config"] == 'x username="admin" password="s3cret";'
    assert resolved["broker.rack"] == "eu-west-1a"
    assert resolved["client.rack"] == "zone-b"
    assert resolved["config.providers.dir.class"] == DIRECTORY_PROVIDER and not warnings


def test_a_directory_file_is_taken_whole_and_each_path_is_read_once():
    files = MemoryFiles(FILES)
    settings = ALL_THREE | {"a": "${dir:/run/init:with-newline}", "b": "${dir:/run/init:rack.id}/${dir:/run/init:rack.id}"}
    resolved, _ = ConfigProviders(settings, files, ENVIRON).resolve(settings)
    assert resolved["a"] == "line\n"  # Kafka does not trim a file's content
    assert resolved["b"] == "eu-west-1a/eu-west-1a"
    assert sorted(files.read) == ["/run/init/rack.id", "/run/init/with-newline"]


@pytest.mark.parametrize("reference", [
    "${file:/etc/secrets/db.properties:missing}",  # a key the file lacks
    "${dir:/run/init:missing}",  # a file the directory lacks
    "${dir:/run/init/rack.id:rack.id}",  # not a directory (a warning)
    "${dir:/nowhere:rack.id}",  # no such directory (a warning)
    "${env:NOT_SET}",
    "${vault:/secret:key}",  # a provider not configured
    "${file:key}",  # the file provider without a path
], ids=["file-key", "dir-file", "dir-not-a-dir", "dir-missing", "env", "unknown-provider", "no-path"])
def test_a_reference_nothing_answers_is_left_as_it_is(reference):
    resolved, _ = resolve(ALL_THREE | {"x": f"a {reference} b"})
    assert resolved["x"] == f"a {reference} b"


def test_a_directory_that_is_not_one_is_reported():
    _, warnings = resolve(ALL_THREE | {"x": "${dir:/nowhere:rack.id}"})
    assert warnings == ["The path /nowhere is not a directory"]


def test_the_second_colon_ends_the_path_and_the_key_takes_the_rest():
    files = {"/a/c:d": "v", "/a:b/c": "w"}
    resolved, _ = resolve(ALL_THREE | {"x": "${dir:/a:c:d}", "y": "${dir:/a:b:c}"}, files)
    assert resolved["x"] == "v"
    assert resolved["y"] == "${dir:/a:b:c}"  # the directory /a has no file "b:c"; /a:b is never asked


def test_a_replacement_is_not_searched_for_references_again():
    files = {"/d/one": "${dir:/d:two}", "/d/two": "2"}
    resolved, _ = resolve(ALL_THREE | {"x": "${dir:/d:one}"}, files)
    assert resolved["x"] == "${dir:/d:two}"


def test_without_providers_nothing_is_replaced():
    settings = {"broker.rack": "${dir:/run/init:rack.id}", "config.providers.dir.class": DIRECTORY_PROVIDER}
    assert resolve(settings) == (settings, [])
    # a provider named without a class is no provider, as in Kafka
    assert resolve(settings | {"config.providers": "file"})[0]["broker.rack"] == "${dir:/run/init:rack.id}"


def test_allowed_paths_limit_the_file_and_directory_providers():
    settings = ALL_THREE | {"config.providers.dir.param.allowed.paths": "/etc/secrets,/run/init",
                            "config.providers.file.param.allowed.paths": "/run/init",
                            "a": "${dir:/run/init:rack.id}", "b": "${dir:/run/init/../init:rack.id}",
                            "c": "${file:/etc/secrets/db.properties:user}",
                            "d": "${dir:/run/initial:rack.id}"}
    files = FILES | {"/run/initial/rack.id": "elsewhere"}
    resolved, warnings = resolve(settings, files)
    assert (resolved["a"], resolved["b"]) == ("eu-west-1a", "eu-west-1a")  # compared after removing ..
    assert resolved["c"] == "${file:/etc/secrets/db.properties:user}"
    assert resolved["d"] == "${dir:/run/initial:rack.id}"  # whole path components: /run/initial is not /run/init
    assert "The path /etc/secrets/db.properties is not allowed to be accessed" in warnings


@pytest.mark.parametrize("allowed,message", [
    ("relative/dir", "config.providers.dir.param.allowed.paths: path relative/dir is not absolute"),
    ("/does/not/exist", "config.providers.dir.param.allowed.paths: path /does/not/exist does not exist"),
])
def test_allowed_paths_must_be_absolute_and_exist(allowed, message):
    with pytest.raises(ConfigError, match=f"^{message}$"):
        resolve(ALL_THREE | {"config.providers.dir.param.allowed.paths": allowed})


def test_the_environment_provider_sees_only_allowed_variables_and_takes_no_path():
    settings = ALL_THREE | {"config.providers.env.param.allowlist.pattern": "BROKER_.*",
                            "a": "${env:BROKER_RACK}", "b": "${env:HOME}"}
    resolved, _ = resolve(settings)
    assert (resolved["a"], resolved["b"]) == ("zone-b", "${env:HOME}")
    # the pattern matches the whole name, as Java's Matcher.matches
    resolved, _ = resolve(ALL_THREE | {"config.providers.env.param.allowlist.pattern": "BROKER", "a": "${env:BROKER_RACK}"})
    assert resolved["a"] == "${env:BROKER_RACK}"
    with pytest.raises(ConfigError, match=r"^Path is not supported for EnvVarConfigProvider, invalid value '/x'$"):
        resolve(ALL_THREE | {"a": "${env:/x:HOME}"})


def test_a_file_that_cannot_be_read_stops_the_node():
    with pytest.raises(ConfigError, match=r"^Could not read properties from file /etc/missing.properties$"):
        resolve(ALL_THREE | {"a": "${file:/etc/missing.properties:key}"})


def test_a_class_odradek_does_not_have_is_one_line_naming_it():
    settings = {"config.providers": "vault", "config.providers.vault.class": "com.example.VaultConfigProvider"}
    with pytest.raises(ConfigError) as error:
        resolve(settings)
    message = str(error.value)
    assert "\n" not in message
    assert message.startswith("Invalid value com.example.VaultConfigProvider for configuration "
                              "config.providers.vault.class: Could not load config provider class")


def test_the_node_config_resolves_file_and_overrides_before_validation(tmp_path, monkeypatch):
    (tmp_path / "init").mkdir()
    (tmp_path / "init" / "rack.id").write_text("zone-a")
    (tmp_path / "init" / "partitions").write_text("6")
    config_file = tmp_path / "server.properties"
    config_file.write_text(f"config.providers=dir\nconfig.providers.dir.class={DIRECTORY_PROVIDER}\n"
                           f"num.partitions=${{dir:{tmp_path}/init:partitions}}\n")
    monkeypatch.setenv("ODRADEK_TEST_RETENTION", "2")
    config = BrokerConfig.load(str(config_file), [
        f"broker.rack=${{dir:{tmp_path}/init:rack.id}}", "config.providers=dir,env",
        f"config.providers.env.class={ENV_VAR_PROVIDER}", "log.retention.hours=${env:ODRADEK_TEST_RETENTION}"])
    assert (config["broker.rack"], config["num.partitions"], config["log.retention.hours"]) == ("zone-a", 6, 2)
    assert config.unknown == []  # the provider settings are not reported as unknown

    (tmp_path / "init" / "partitions").write_text("six")
    with pytest.raises(ConfigError, match="Invalid value six for configuration num.partitions"):
        BrokerConfig.load(str(config_file))
    with pytest.raises(ConfigError, match="com.example.Nope"):
        BrokerConfig.load(None, ["config.providers=x", "config.providers.x.class=com.example.Nope"])


def test_a_node_reports_the_rack_its_config_provider_read(node_factory, tmp_path):
    (tmp_path / "init").mkdir()
    (tmp_path / "init" / "rack.id").write_text("eu-west-1b")
    node = node_factory({"config.providers": "dir", "config.providers.dir.class": DIRECTORY_PROVIDER,
                         "broker.rack": f"${{dir:{tmp_path / 'init'}:rack.id}}"})
    admin = AdminClient({"bootstrap.servers": node.bootstrap})
    described = admin.describe_cluster(request_timeout=30).result(60)
    assert [(broker.id, broker.rack) for broker in described.nodes] == [(1, "eu-west-1b")]
