"""One small registry for every pluggable kind (model-family modules, adapters, and the other plugin points).

A :class:`Registry` holds, by name: the built-ins (found by :func:`discover` in a package's family files, or given),
then what installed packages declare under an entry-point group (an entry point replaces a built-in of the same name,
with a log line), and resolves ``"package.module:object"`` specs on demand. Adding a family is therefore one file in
the package (it lists its classes in ``FAMILY``), or one entry point in a third-party package.
"""

from __future__ import annotations

import importlib
import logging
import pkgutil
from collections.abc import Callable, Iterable
from typing import Any

logger = logging.getLogger(__name__)


def discover(package: str, attribute: str = "FAMILY") -> list:
    """Every object listed in ``attribute`` of each submodule of ``package`` (files in alphabetical order); a
    submodule without the attribute contributes nothing (base classes, helpers)."""
    pkg = importlib.import_module(package)
    found = []
    for info in sorted(pkgutil.iter_modules(pkg.__path__), key=lambda i: i.name):
        module = importlib.import_module(f"{package}.{info.name}")
        found.extend(getattr(module, attribute, ()))
    return found


def load_spec(spec: str) -> Any:
    """The object named by ``"package.module:attribute"`` (attribute may be dotted).

    Raises:
        ValueError: not of that form, or nothing by that name.
    """
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise ValueError(f"{spec!r} is not 'package.module:object'")
    try:
        obj = importlib.import_module(module_name)
        for part in attr.split("."):
            obj = getattr(obj, part)
    except (ImportError, AttributeError) as err:
        raise ValueError(f"cannot load {spec!r}: {err}") from err
    return obj


class Registry:
    """Name -> object, from built-ins and an entry-point group.

    Args:
        kind: what is registered, for messages ("model type", "adapter", ...).
        group: the entry-point group third-party packages register under.
        builtins: returns the built-in ``{name: object}`` (called once, lazily).
        replace: an entry point may replace a built-in of the same name (default, logged); False: such a name is
            refused by :meth:`get` (:attr:`conflicts`).
        own: a module prefix (``"vlm_r1."``): the group's entry points whose object lies below it are the registering
            package's own, counted as built-ins (an edge package the registry's module must not import registers
            this way; a third-party entry point of the same name replaces or conflicts with it as with a built-in).
    """

    def __init__(
        self,
        kind: str,
        group: str,
        builtins: Callable[[], dict[str, Any]],
        *,
        replace: bool = True,
        own: str | None = None,
    ):
        self.kind, self.group, self._builtins, self.replace, self.own = kind, group, builtins, replace, own
        self._cache: dict[str, Any] | None = None
        #: name -> the entry point (``module:object``) that collides with a built-in, when ``replace`` is False
        self.conflicts: dict[str, str] = {}

    def available(self) -> dict[str, Any]:
        """Built-ins, then entry points. An entry point of a built-in's name replaces it (logged), or, with
        ``replace=False`` (rewards: a silently swapped reward would train the wrong objective), is recorded in
        :attr:`conflicts` and :meth:`get` refuses that name."""
        if self._cache is None:
            from importlib.metadata import entry_points

            items = dict(self._builtins())
            found = list(entry_points(group=self.group))
            ours = [ep for ep in found if self._is_own(ep)]
            items.update({ep.name: ep.load() for ep in ours})
            builtin_names = set(items)
            self.conflicts = {}
            for ep in found:
                if any(ep is o for o in ours):
                    continue
                if ep.name in builtin_names:
                    if not self.replace:
                        self.conflicts[ep.name] = ep.value
                        continue
                    logger.info("%s %s: %s (entry point) replaces %s", self.kind, ep.name, ep.value, items[ep.name])
                items[ep.name] = ep.load()
            self._cache = items
        return dict(self._cache)

    def _is_own(self, ep: Any) -> bool:
        return bool(self.own) and str(getattr(ep, "value", "")).startswith(self.own)

    def builtin_names(self) -> list[str]:
        """The built-in names: given ones, then the registering package's own entry points (``own``)."""
        from importlib.metadata import entry_points

        return [*self._builtins(), *(ep.name for ep in entry_points(group=self.group) if self._is_own(ep))]

    def names(self) -> list[str]:
        return list(self.available())

    def get(self, name: str) -> Any:
        """The object registered as ``name``, or the one a ``"package.module:object"`` spec names.

        Raises:
            ValueError: unknown name (the message lists the registered ones), a bad spec, or a name both built in and
                registered by an entry point when ``replace`` is False.
        """
        items = self.available()
        if name in self.conflicts:
            raise ValueError(
                f"{self.kind} {name!r} is both built in and registered by {self.conflicts[name]}; rename "
                "the plugin's entry"
            )
        if name in items:
            return items[name]
        if ":" in name:
            return load_spec(name)
        raise ValueError(f"unknown {self.kind} {name!r}; registered: {', '.join(items)}")

    def get_callable(self, name: str) -> Callable:
        """:meth:`get`, checked to be callable (a function or a class): what every registry of functions and classes
        (rewards, tasks, benchmarks, backends) hands out.

        Raises:
            ValueError: as :meth:`get` (a spec that cannot be loaded: ``KIND 'spec': cannot load ...; registered:
                ...``), or ``KIND 'name' is OBJ, not callable``.
        """
        try:
            obj = self.get(name)
        except ValueError as err:
            if ":" in name and name not in self.available():
                raise ValueError(f"{self.kind} {name!r}: {err}; registered: {', '.join(self.available())}") from err
            raise
        if not callable(obj):
            raise ValueError(f"{self.kind} {name!r} is {obj!r}, not callable")
        return obj

    def refresh(self) -> None:
        """Forget the cached lookup (after installing a plugin in-process, in tests)."""
        self._cache = None


def by_attribute(objects: Iterable[Any], attribute: str) -> dict[str, Any]:
    """``{key: obj}`` for every key in each object's ``attribute`` (a tuple of names, e.g. ``model_types``)."""
    return {key: obj for obj in objects for key in getattr(obj, attribute)}
