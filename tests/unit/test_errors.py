"""One error taxonomy: every error wattsched raises is a named subclass of WattschedError."""

import inspect

import wattsched.errors as errors


def test_one_missing_dependency_error():
    import wattsched.policies
    import wattsched.predictors

    classes = [c for _, c in inspect.getmembers(errors, inspect.isclass) if issubclass(c, ImportError)]
    assert classes == [errors.MissingDependencyError]
    for cls in (wattsched.policies.UnavailablePolicy, wattsched.predictors.UnavailablePredictor):
        assert issubclass(cls, errors.MissingDependencyError)
