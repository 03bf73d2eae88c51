"""Errors of model endpoints, with what a command line needs to report them in one line."""

from __future__ import annotations

# HTTP statuses that mean the configuration is wrong (key, URL, model name), not that the
# endpoint is having a bad moment: retrying cannot help, the user must fix something.
CONFIG_STATUSES = {401: "check the API key", 403: "check the API key and its permissions",
                   404: "check the endpoint URL and the model name"}


class EndpointError(RuntimeError):
    """An endpoint failed, answered in a shape we cannot read, or retries ran out.

    `endpoint` is the URL asked, `status` the last HTTP status (None without a response);
    `config_error` is True for 401/403/404 and redirects, which the CLI reports with exit code 2; `transient`:
    the attempts ran out on timeouts, lost connections or 429/5xx, so a later call may pass
    (`serving._util.retry.transient` reads it).
    """

    def __init__(self, message: str, *, endpoint: str | None = None, status: int | None = None,
                 transient: bool = False):
        super().__init__(message)
        self.endpoint, self.status, self.transient = endpoint, status, transient

    @property
    def config_error(self) -> bool:
        # a redirect too: the configured URL is not where the API is, and we do not follow it
        return self.status in CONFIG_STATUSES or (self.status is not None and 300 <= self.status < 400)

    def __reduce__(self):  # keep the fields across processes (Ray actors pickle exceptions)
        return (_rebuild, (str(self), self.endpoint, self.status, self.transient))


def _rebuild(message: str, endpoint: str | None, status: int | None, transient: bool = False) -> EndpointError:
    return EndpointError(message, endpoint=endpoint, status=status, transient=transient)
