"""The project's refusal of user input, told apart from a failure of its own code.

:class:`InputError` is raised where a scene, trajectory, study, data or mesh file, one of its fields, or a
command-line option is refused; its message names the file or option and what is allowed. It is a
``ValueError``, so code that catches ``ValueError`` keeps working. The command line exits 2 with the message;
any other exception escaping a command is an internal error (exit 70, with where it was raised).
:class:`SceneWarning` is the warning of an input that loads but probably does not do what its author meant.
"""

from __future__ import annotations


class InputError(ValueError):
    """A user input (file, field, option) is refused; the message says which and what is allowed."""


class SceneWarning(UserWarning):
    """A scene that loads but probably does not do what its author meant (the message says why)."""
