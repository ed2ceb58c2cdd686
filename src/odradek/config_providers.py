"""Kafka's config providers (KIP-297) for a node's configuration: `${provider:[path:]key}` in a setting's value is
replaced, when the configuration is loaded, by what the provider named in `config.providers` finds there.

Kafka's three built-in providers, with Kafka 4.0's behaviour (its AbstractConfig, ConfigTransformer and
org.apache.kafka.common.config.provider classes):
- FileConfigProvider, `${file:/path/to/file.properties:key}`: the key of a properties file. A file that cannot be
  read stops the node; a key not in it leaves the reference as it is.
- DirectoryConfigProvider, `${dir:/path/to/dir:name}`: the whole content of the file of that name in the
  directory (not trimmed). A path that is not a directory, or a missing file, leaves the reference as it is.
- EnvVarConfigProvider, `${env:NAME}`: an environment variable matching the `allowlist.pattern` param (a
  regular expression the whole name must match; default every variable); a path is refused.
`allowed.paths` (the file and directory providers' param, KIP-993): comma-separated absolute paths that must
exist; a reference outside them leaves the reference as it is. A reference to a provider not configured, or
without a path where the provider needs one, is also left as it is; a provider named without a class is ignored.
Values are replaced once (a replacement is not searched for references again). Kubernetes uses this to give a
broker the zone of the node its Pod runs on (docs/config-providers.md).

The core (ConfigProviders.resolve) reads files through an injected Files and the environment from a mapping;
resolve_config_providers is the shell that reads the local disk and environment.
"""

from __future__ import annotations

import logging
import os
import posixpath
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import Protocol

from odradek.config import CONFIG_PROVIDERS, ConfigError, parse_properties

log = logging.getLogger(__name__)

FILE_PROVIDER = "org.apache.kafka.common.config.provider.FileConfigProvider"
DIRECTORY_PROVIDER = "org.apache.kafka.common.config.provider.DirectoryConfigProvider"
ENV_VAR_PROVIDER = "org.apache.kafka.common.config.provider.EnvVarConfigProvider"
PROVIDER_CLASSES = (FILE_PROVIDER, DIRECTORY_PROVIDER, ENV_VAR_PROVIDER)
ALLOWED_PATHS_PARAM = "allowed.paths"
ALLOWLIST_PATTERN_PARAM = "allowlist.pattern"

# Kafka's ConfigTransformer.DEFAULT_PATTERN: the provider's name, an optional path, the key. The lazy groups
# make the first colon end the name and the second the path: a key may hold colons, a path may not.
REFERENCE = re.compile(r"\$\{([^}]*?):(([^}]*?):)?([^}]*?)\}")


class Files(Protocol):
    """What the file and directory providers read; paths are absolute or relative to the working directory."""

    def exists(self, path: str) -> bool: ...

    def is_dir(self, path: str) -> bool: ...

    def regular_files(self, directory: str) -> set[str]:
        """The names of the regular files (symbolic links to one included) directly in the directory."""

    def read_text(self, path: str) -> str:
        """The file's content as UTF-8; an OSError when it cannot be read."""


class LocalFiles:
    def exists(self, path: str) -> bool:
        return os.path.exists(path)

    def is_dir(self, path: str) -> bool:
        return os.path.isdir(path)

    def regular_files(self, directory: str) -> set[str]:
        return {entry.name for entry in os.scandir(directory) if entry.is_file()}

    def read_text(self, path: str) -> str:
        with open(path, encoding="utf-8") as f:
            return f.read()


@dataclass
class _Lookup:
    """What one provider found for one path: key -> value, and warnings for the log."""

    values: dict[str, str] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)


class _AllowedPaths:
    """Kafka's AllowedPaths: unset, every path; else only paths under one of the given ones, compared by whole
    components after removing . and .. (without following links)."""

    def __init__(self, setting: str | None, files: Files, param: str) -> None:
        self.roots: list[PurePosixPath] | None = None
        if setting:
            self.roots = []
            for entry in setting.split(","):
                root = PurePosixPath(posixpath.normpath(entry.strip()))
                if not root.is_absolute():
                    raise ConfigError(f"{param}: path {root} is not absolute")
                if not files.exists(str(root)):
                    raise ConfigError(f"{param}: path {root} does not exist")
                self.roots.append(root)

    def parse(self, path: str) -> str | None:
        """The path to read (normalized when limited), or None when it is not allowed."""
        if self.roots is None:
            return path
        normal = PurePosixPath(posixpath.normpath(path))
        return str(normal) if any(normal.parts[:len(root.parts)] == root.parts for root in self.roots) else None


class _PathProvider:
    """A provider reading files under a path, within its allowed.paths."""

    def __init__(self, params: Mapping[str, str], files: Files, prefix: str) -> None:
        self.files = files
        self.allowed = _AllowedPaths(params.get(ALLOWED_PATHS_PARAM), files, prefix + ALLOWED_PATHS_PARAM)

    def get(self, path: str, keys: set[str]) -> _Lookup:
        if not path:
            return _Lookup()
        allowed = self.allowed.parse(path)
        if allowed is None:
            return _Lookup(warnings=[f"The path {path} is not allowed to be accessed"])
        return self.read(path, allowed, keys)

    def read(self, path: str, allowed: str, keys: set[str]) -> _Lookup:
        raise NotImplementedError


class _FileProvider(_PathProvider):
    def read(self, path: str, allowed: str, keys: set[str]) -> _Lookup:
        try:
            properties = parse_properties(self.files.read_text(allowed))
        except (OSError, UnicodeDecodeError):
            raise ConfigError(f"Could not read properties from file {path}") from None
        return _Lookup({key: properties[key] for key in keys if key in properties})


class _DirectoryProvider(_PathProvider):
    def read(self, path: str, allowed: str, keys: set[str]) -> _Lookup:
        if not self.files.is_dir(allowed):
            return _Lookup(warnings=[f"The path {path} is not a directory"])
        try:
            names = self.files.regular_files(allowed) & keys
        except OSError:
            raise ConfigError(f"Could not list directory {path}") from None
        values = {}
        for name in names:
            try:
                values[name] = self.files.read_text(posixpath.join(allowed, name))
            except (OSError, UnicodeDecodeError):
                raise ConfigError(f"Could not read file {posixpath.join(allowed, name)} for property {name}") from None
        return _Lookup(values)


class _EnvVarProvider:
    def __init__(self, params: Mapping[str, str], environ: Mapping[str, str], prefix: str) -> None:
        pattern = params.get(ALLOWLIST_PATTERN_PARAM, ".*")
        try:
            allowlist = re.compile(pattern)
        except re.error as e:
            raise ConfigError(f"Invalid value {pattern} for configuration {prefix}{ALLOWLIST_PATTERN_PARAM}: "
                              f"{e}") from None
        self.variables = {name: value for name, value in environ.items() if allowlist.fullmatch(name)}

    def get(self, path: str, keys: set[str]) -> _Lookup:
        if path:
            raise ConfigError(f"Path is not supported for EnvVarConfigProvider, invalid value '{path}'")
        return _Lookup({key: self.variables[key] for key in keys if key in self.variables})


class ConfigProviders:
    """The providers a configuration names, configured from its config.providers.* settings."""

    def __init__(self, props: Mapping[str, str], files: Files, environ: Mapping[str, str]) -> None:
        self.providers: dict[str, _FileProvider | _DirectoryProvider | _EnvVarProvider] = {}
        # Kafka does not strip the names; here "file, dir" means what it looks like
        names = [name.strip() for name in props.get(CONFIG_PROVIDERS, "").split(",") if name.strip()]
        for name in names:
            class_key = f"{CONFIG_PROVIDERS}.{name}.class"
            if class_key not in props:
                continue  # as Kafka: a provider without a class is no provider
            class_name = props[class_key].strip()
            prefix = f"{CONFIG_PROVIDERS}.{name}.param."
            params = {key[len(prefix):]: value for key, value in props.items() if key.startswith(prefix)}
            if class_name == FILE_PROVIDER:
                self.providers[name] = _FileProvider(params, files, prefix)
            elif class_name == DIRECTORY_PROVIDER:
                self.providers[name] = _DirectoryProvider(params, files, prefix)
            elif class_name == ENV_VAR_PROVIDER:
                self.providers[name] = _EnvVarProvider(params, environ, prefix)
            else:
                raise ConfigError(f"Invalid value {class_name} for configuration {class_key}: Could not load config "
                                  f"provider class (Odradek has Kafka's {', '.join(PROVIDER_CLASSES)})")

    def resolve(self, props: Mapping[str, str]) -> tuple[dict[str, str], list[str]]:
        """The settings with every reference the providers find replaced, and warnings for the log."""
        wanted: dict[tuple[str, str], set[str]] = {}  # (provider, path) -> keys, so each path is read once
        for value in props.values():
            for match in REFERENCE.finditer(value):
                provider, path, key = _reference(match)
                if provider in self.providers:
                    wanted.setdefault((provider, path), set()).add(key)
        found: dict[tuple[str, str], dict[str, str]] = {}
        warnings: list[str] = []
        for (provider, path), keys in wanted.items():
            lookup = self.providers[provider].get(path, keys)
            found[provider, path] = lookup.values
            warnings += lookup.warnings

        def replace(match: re.Match) -> str:
            provider, path, key = _reference(match)
            return found.get((provider, path), {}).get(key, match.group(0))

        return {name: REFERENCE.sub(replace, value) for name, value in props.items()}, warnings


def _reference(match: re.Match) -> tuple[str, str, str]:
    return match.group(1), match.group(3) or "", match.group(4)


def resolve_config_providers(props: Mapping[str, str]) -> dict[str, str]:
    """The node's settings (file and overrides merged) with their provider references resolved from this
    machine's files and environment; a ConfigError (one line) when a provider cannot be set up or read."""
    if not props.get(CONFIG_PROVIDERS, "").strip():
        return dict(props)
    resolved, warnings = ConfigProviders(props, LocalFiles(), os.environ).resolve(props)
    for warning in warnings:
        log.warning("%s", warning)
    return resolved
