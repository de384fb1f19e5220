"""The one place where libcurl error codes become :class:`ErrorKind` values.

Codes are the ``CURLcode`` numbers of ``curl/curl.h`` (libcurl 8.x); they are listed by number
because older pycurl builds lack constants for the newer codes (``CURLE_PROXY``,
``CURLE_HTTP2_STREAM``, ...). Codes that only exist for non-HTTP protocols are never produced
for our transfers (``PROTOCOLS`` is http/https) and fall to ``OTHER``.

========================================  ====================  ==================================
CURLcode (number)                         ErrorKind             note
========================================  ====================  ==================================
COULDNT_RESOLVE_HOST (6)                  DNS
OPERATION_TIMEDOUT (28)                   DNS / CONNECT /       by phase (see Phase): name not
                                          TIMEOUT               resolved (or libcurl's message
                                                                says "Resolving timed out") ->
                                                                DNS; resolved but no request sent
                                                                -> CONNECT (TCP or TLS handshake);
                                                                else TIMEOUT (also the low-speed
                                                                abort)
COULDNT_CONNECT (7)                       CONNECT / PROXY       PROXY when an HTTP proxy refused
                                                                the tunnel ("CONNECT tunnel
                                                                failed, response 502")
NO_CONNECTION_AVAILABLE (89)              CONNECT
QUIC_CONNECT_ERROR (96)                   CONNECT               transient, like a TCP failure
SSL_CONNECT_ERROR (35)                    TLS
SSL_ENGINE_NOTFOUND (53)                  TLS
SSL_ENGINE_SETFAILED (54)                 TLS
SSL_CERTPROBLEM (58)                      TLS
SSL_CIPHER (59)                           TLS
PEER_FAILED_VERIFICATION (60)             TLS                   (old alias: SSL_CACERT)
USE_SSL_FAILED (64)                       TLS
SSL_ENGINE_INITFAILED (66)                TLS
SSL_CACERT_BADFILE (77)                   TLS
SSL_SHUTDOWN_FAILED (80)                  TLS
SSL_CRL_BADFILE (82)                      TLS
SSL_ISSUER_ERROR (83)                     TLS
SSL_PINNEDPUBKEYNOTMATCH (90)             TLS
SSL_INVALIDCERTSTATUS (91)                TLS
SSL_CLIENTCERT (98)                       TLS
ECH_REQUIRED (101)                        TLS
PARTIAL_FILE (18)                         TRUNCATED
RECV_ERROR (56)                           TRUNCATED             PROTOCOL if the message names
                                                                chunked encoding (libcurl reports
                                                                bad chunking as RECV_ERROR)
SEND_ERROR (55)                           TRUNCATED             connection broke mid-exchange
GOT_NOTHING (52)                          TRUNCATED             the server closed without a byte;
                                                                transient, usually an overloaded
                                                                server or a keep-alive race
FILESIZE_EXCEEDED (63)                    TOO_LARGE             MAXFILESIZE: announced length
TOO_LARGE (100)                           TOO_LARGE             e.g. a response header block over
                                                                libcurl's limit
WRITE_ERROR (23)                          TOO_LARGE / OTHER     TOO_LARGE only when the fetcher
                                                                aborted for size (the transfer
                                                                records it); otherwise OTHER
UNSUPPORTED_PROTOCOL (1)                  FORBIDDEN_SCHEME /    FORBIDDEN_SCHEME when the message
                                          PROTOCOL              is libcurl's 'Protocol "x" not
                                                                supported / disabled' (a redirect
                                                                to a non-http(s) URL refused by
                                                                REDIR_PROTOCOLS); PROTOCOL
                                                                otherwise: libcurl also uses this
                                                                code for malformed responses
                                                                ("Received HTTP/0.9 when not
                                                                allowed", "Unsupported HTTP/1
                                                                subversion in response")
WEIRD_SERVER_REPLY (8)                    PROTOCOL
HTTP2 (16)                                PROTOCOL
BAD_CONTENT_ENCODING (61)                 PROTOCOL
HTTP2_STREAM (92)                         TRUNCATED / PROTOCOL  a stream reset: REFUSED_STREAM (the
                                                                server did not process it), a
                                                                GOAWAY or a connection that ended
                                                                under the stream, CANCEL,
                                                                INTERNAL_ERROR, ENHANCE_YOUR_CALM
                                                                are transient (TRUNCATED);
                                                                PROTOCOL only if the message names
                                                                PROTOCOL_ERROR, FRAME_SIZE_ERROR,
                                                                COMPRESSION_ERROR,
                                                                FLOW_CONTROL_ERROR or
                                                                HTTP_1_1_REQUIRED
HTTP3 (95)                                PROTOCOL
COULDNT_RESOLVE_PROXY (5)                 PROXY
PROXY (97)                                PROXY
TOO_MANY_REDIRECTS (47)                   REDIRECTS             past MAXREDIRS (only requests
                                                                that follow redirects)
anything else (URL_MALFORMAT,             OTHER
ABORTED_BY_CALLBACK, OUT_OF_MEMORY, ...)
========================================  ====================  ==================================

A decoding failure detected by the fetcher itself (corrupt gzip/deflate stream) is reported as
``PROTOCOL`` without going through this table.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from frontier_crawl.fetch.types import ErrorKind

__all__ = ["CURLE_OPERATION_TIMEDOUT", "CURLE_WRITE_ERROR", "Phase", "map_curl_error"]

CURLE_UNSUPPORTED_PROTOCOL = 1
CURLE_COULDNT_RESOLVE_PROXY = 5
CURLE_COULDNT_RESOLVE_HOST = 6
CURLE_COULDNT_CONNECT = 7
CURLE_WEIRD_SERVER_REPLY = 8
CURLE_HTTP2 = 16
CURLE_PARTIAL_FILE = 18
CURLE_WRITE_ERROR = 23
CURLE_OPERATION_TIMEDOUT = 28
CURLE_SSL_CONNECT_ERROR = 35
CURLE_TOO_MANY_REDIRECTS = 47
CURLE_GOT_NOTHING = 52
CURLE_SSL_ENGINE_NOTFOUND = 53
CURLE_SSL_ENGINE_SETFAILED = 54
CURLE_SEND_ERROR = 55
CURLE_RECV_ERROR = 56
CURLE_SSL_CERTPROBLEM = 58
CURLE_SSL_CIPHER = 59
CURLE_PEER_FAILED_VERIFICATION = 60
CURLE_BAD_CONTENT_ENCODING = 61
CURLE_FILESIZE_EXCEEDED = 63
CURLE_USE_SSL_FAILED = 64
CURLE_SSL_ENGINE_INITFAILED = 66
CURLE_SSL_CACERT_BADFILE = 77
CURLE_SSL_SHUTDOWN_FAILED = 80
CURLE_SSL_CRL_BADFILE = 82
CURLE_SSL_ISSUER_ERROR = 83
CURLE_NO_CONNECTION_AVAILABLE = 89
CURLE_SSL_PINNEDPUBKEYNOTMATCH = 90
CURLE_SSL_INVALIDCERTSTATUS = 91
CURLE_HTTP2_STREAM = 92
CURLE_HTTP3 = 95
CURLE_QUIC_CONNECT_ERROR = 96
CURLE_PROXY = 97
CURLE_SSL_CLIENTCERT = 98
CURLE_TOO_LARGE = 100
CURLE_ECH_REQUIRED = 101

_TABLE: dict[int, ErrorKind] = {
    CURLE_COULDNT_RESOLVE_HOST: ErrorKind.DNS,
    CURLE_OPERATION_TIMEDOUT: ErrorKind.TIMEOUT,
    CURLE_COULDNT_CONNECT: ErrorKind.CONNECT,
    CURLE_NO_CONNECTION_AVAILABLE: ErrorKind.CONNECT,
    CURLE_QUIC_CONNECT_ERROR: ErrorKind.CONNECT,
    CURLE_SSL_CONNECT_ERROR: ErrorKind.TLS,
    CURLE_SSL_ENGINE_NOTFOUND: ErrorKind.TLS,
    CURLE_SSL_ENGINE_SETFAILED: ErrorKind.TLS,
    CURLE_SSL_CERTPROBLEM: ErrorKind.TLS,
    CURLE_SSL_CIPHER: ErrorKind.TLS,
    CURLE_PEER_FAILED_VERIFICATION: ErrorKind.TLS,
    CURLE_USE_SSL_FAILED: ErrorKind.TLS,
    CURLE_SSL_ENGINE_INITFAILED: ErrorKind.TLS,
    CURLE_SSL_CACERT_BADFILE: ErrorKind.TLS,
    CURLE_SSL_SHUTDOWN_FAILED: ErrorKind.TLS,
    CURLE_SSL_CRL_BADFILE: ErrorKind.TLS,
    CURLE_SSL_ISSUER_ERROR: ErrorKind.TLS,
    CURLE_SSL_PINNEDPUBKEYNOTMATCH: ErrorKind.TLS,
    CURLE_SSL_INVALIDCERTSTATUS: ErrorKind.TLS,
    CURLE_SSL_CLIENTCERT: ErrorKind.TLS,
    CURLE_ECH_REQUIRED: ErrorKind.TLS,
    CURLE_PARTIAL_FILE: ErrorKind.TRUNCATED,
    CURLE_RECV_ERROR: ErrorKind.TRUNCATED,
    CURLE_SEND_ERROR: ErrorKind.TRUNCATED,
    CURLE_GOT_NOTHING: ErrorKind.TRUNCATED,
    CURLE_FILESIZE_EXCEEDED: ErrorKind.TOO_LARGE,
    CURLE_TOO_MANY_REDIRECTS: ErrorKind.REDIRECTS,
    CURLE_TOO_LARGE: ErrorKind.TOO_LARGE,
    CURLE_WRITE_ERROR: ErrorKind.OTHER,
    CURLE_UNSUPPORTED_PROTOCOL: ErrorKind.FORBIDDEN_SCHEME,
    CURLE_WEIRD_SERVER_REPLY: ErrorKind.PROTOCOL,
    CURLE_HTTP2: ErrorKind.PROTOCOL,
    CURLE_BAD_CONTENT_ENCODING: ErrorKind.PROTOCOL,
    CURLE_HTTP3: ErrorKind.PROTOCOL,
    CURLE_COULDNT_RESOLVE_PROXY: ErrorKind.PROXY,
    CURLE_PROXY: ErrorKind.PROXY,
}


#: HTTP/2 stream reset codes that say the exchange itself was malformed (retrying won't help)
_H2_MALFORMED = re.compile(
    r"PROTOCOL_ERROR|FRAME_SIZE_ERROR|COMPRESSION_ERROR|FLOW_CONTROL_ERROR|HTTP_1_1_REQUIRED"
)


@dataclass(slots=True, frozen=True)
class Phase:
    """How far a transfer got before it failed, as far as the fetcher can tell.

    ``resolved``: the host name had been resolved; ``connected``: the connection (TCP, and TLS
    for https) was up, i.e. the request was sent. Both default to True, meaning "no evidence
    of an early failure".
    ``aborted_too_large``: the fetcher itself aborted the transfer because the body exceeded
    ``max_body_bytes`` (recorded in the transfer state, never guessed from the message).
    """

    resolved: bool = True
    connected: bool = True
    aborted_too_large: bool = False


_NO_EVIDENCE = Phase()


def map_curl_error(code: int, message: str, phase: Phase = _NO_EVIDENCE) -> ErrorKind:
    """Translate a libcurl error code (with its message and the transfer's phase) to a kind.

    ``code`` 0 (CURLE_OK) is not an error and must not be passed.
    """
    if code == CURLE_WRITE_ERROR and phase.aborted_too_large:
        return ErrorKind.TOO_LARGE
    if code == CURLE_OPERATION_TIMEDOUT:
        return _timeout_kind(phase, message)
    if code == CURLE_COULDNT_CONNECT and message.startswith("CONNECT tunnel failed"):
        return ErrorKind.PROXY
    if code == CURLE_RECV_ERROR and "chunk" in message.lower():
        return ErrorKind.PROTOCOL
    if code == CURLE_UNSUPPORTED_PROTOCOL and not _is_scheme_refusal(message):
        return ErrorKind.PROTOCOL
    if code == CURLE_HTTP2_STREAM:
        return ErrorKind.PROTOCOL if _H2_MALFORMED.search(message) else ErrorKind.TRUNCATED
    return _TABLE.get(code, ErrorKind.OTHER)


def _timeout_kind(phase: Phase, message: str) -> ErrorKind:
    """A timeout is charged to the phase the transfer was stuck in."""
    if not phase.resolved or message.lower().startswith("resolving timed out"):
        return ErrorKind.DNS
    if not phase.connected:
        return ErrorKind.CONNECT
    return ErrorKind.TIMEOUT


def _is_scheme_refusal(message: str) -> bool:
    """libcurl's 'Protocol "gopher" not supported' / '... disabled' (not a malformed reply)."""
    text = message.lower()
    return text.startswith("protocol") and ("not supported" in text or "disabled" in text)
