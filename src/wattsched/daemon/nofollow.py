"""An ``urllib`` opener that never follows a redirect, for requests that carry credentials.

``urllib``'s redirect handler copies every header but the body's onto the new request, so a token sent to one
host (``X-SLURM-USER-TOKEN``, ``Authorization: Bearer``) would be sent to wherever a ``Location`` points. Here a
3xx answer stays an :class:`urllib.error.HTTPError` (its ``Location`` in ``headers``) that the caller reports.
"""

from __future__ import annotations

import urllib.error
import urllib.request

__all__ = ["NoRedirect", "build_opener", "redirect_message"]


class NoRedirect(urllib.request.HTTPRedirectHandler):
    """Refuses every redirect: ``urllib`` then raises the 3xx answer as an ``HTTPError``."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):
        return None


def build_opener() -> urllib.request.OpenerDirector:
    """A plain opener that ignores proxy variables and follows no redirect."""
    return urllib.request.build_opener(urllib.request.ProxyHandler({}), NoRedirect)


def redirect_message(exc: urllib.error.HTTPError, key: str) -> str | None:
    """What to say about a redirect answer (``None`` if ``exc`` is not one); ``key`` is the URL's config key."""
    if not 300 <= exc.code < 400:
        return None
    location = exc.headers.get("Location") if exc.headers is not None else None
    return (f"redirected to {location or 'an unnamed location'}; redirects are not followed, since they would "
            f"carry the credentials to another address: set {key} to the address that answers")
