"""One error taxonomy: every error wattsched raises is a named subclass of WattschedError."""

import ast
import inspect
from pathlib import Path

import wattsched.errors as errors

SRC = Path(errors.__file__).resolve().parent


def test_no_bare_wattsched_error_is_raised():
    bare = []
    for path in sorted(SRC.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call):
                func = node.exc.func
                name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)
                if name == "WattschedError":
                    bare.append(f"{path.relative_to(SRC)}:{node.lineno}")
    assert not bare, "raise a named subclass of WattschedError (see wattsched.errors), not WattschedError: " + \
        ", ".join(bare)


def test_one_missing_dependency_error():
    import wattsched.policies
    import wattsched.predictors

    classes = [c for _, c in inspect.getmembers(errors, inspect.isclass) if issubclass(c, ImportError)]
    assert classes == [errors.MissingDependencyError]
    for cls in (wattsched.policies.UnavailablePolicy, wattsched.predictors.UnavailablePredictor):
        assert issubclass(cls, errors.MissingDependencyError)
