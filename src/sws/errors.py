"""The one exception type for mistakes a user can fix; the CLI turns it into one line and exit code 2."""


class UserError(Exception):
    """A problem with the user's input: the message names the file, the field and the fix."""
