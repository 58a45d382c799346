"""Names of a package imported on first use (plait.ray, plait.spark), so the
package imports without its engine installed and says what is missing only
when a name is used."""
import importlib


def lazy_getattr(package, names):
    """A module __getattr__ for `package` that imports names[name] (a module
    path) on first use and returns that module's attribute `name`."""

    def __getattr__(name):
        module = names.get(name)
        if module is None:
            raise AttributeError("module %r has no attribute %r" % (package, name))
        return getattr(importlib.import_module(module), name)

    return __getattr__
