"""Every error a threadline user can hit, in one tree.

Each error says what was wrong and what to do about it, and carries the exit status the CLI
uses for it. A few live beside the code that raises them, in the module named in brackets;
``tests/test_errors.py`` checks this tree against the classes::

    ThreadlineError                      exit 1
    ├── InputError                       exit 2   the caller sent something unusable
    │   ├── EmptyMessage
    │   ├── MessageTooLarge
    │   ├── InvalidEncoding
    │   ├── ClientMessageConflict        a client message id reused for a different message
    │   └── ImportFormatError
    ├── NotFound                         exit 3
    │   ├── UnknownConversation
    │   ├── UnknownBranch
    │   ├── UnknownItem
    │   ├── UnknownCall
    │   ├── UnknownCorpus
    │   ├── UnknownMemory                [stores.memory]
    │   ├── UnknownToken                 [stores.tokens]  no bearer token has that id
    │   ├── UnknownResponse              [stores.responses]  deleted, or never stored
    │   ├── UnknownGeneration            [server.app]  no stream has that generation id
    │   └── UnknownBranchPage            [inspector.routes]  an inspector page names no branch
    ├── StoreError                       exit 4   the data file or directory is unusable
    │   ├── NotAThreadlineDatabase
    │   ├── SchemaTooNew
    │   └── StoreReadOnly
    ├── ConflictError                    exit 5   the branch moved under a turn (version check)
    │   ├── TurnSuperseded
    │   ├── TurnInProgress               another turn holds the conversation
    │   ├── TurnCancelled                a newer message stopped this turn
    │   ├── HistoryMismatch              [interop.resent]  a resent history disagrees
    │   └── IdempotencyInProgress        [server.responses]  a send of the same key raced it
    ├── ModelError                       exit 6
    │   ├── ModelUnavailable             the model is missing or unreadable, or no server answered
    │   ├── ContextWindowExceeded
    │   ├── PromptTooLong                the provider says the request is over its window
    │   ├── ModelCallFailed              the call failed; the turn is recorded as failed
    │   ├── ProviderError                a hosted model answered the call with an error
    │   │   ├── ProviderOverloaded       exit 7   retry later (HTTP 529)
    │   │   ├── ProviderRateLimited      exit 7   retry after the time it names (HTTP 429)
    │   │   └── ProviderAuthFailed       the API key is missing, wrong, or not allowed
    │   └── ExtractionFailed             [compaction.extract]  nothing was compacted
    └── AccessDenied                     exit 8   the HTTP service refused the caller
        ├── Unauthorized                 no valid bearer token (HTTP 401)
        └── Forbidden                    the token may not use this (HTTP 403)

Nothing raised before a commit has written anything: a bad input leaves the store unchanged.
A model error raised by a backend during a turn is recorded first, as a failed call, and the
turn can be answered again without sending the message twice.
"""

from __future__ import annotations

from typing import Any


class ThreadlineError(Exception):
    """Base class. ``str(err)`` is the message a user sees; ``hint`` says what to do."""

    exit_code = 1
    details: dict[str, Any] | None = None  # what a program needs besides the message

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return self.message if not self.hint else f"{self.message}\n  hint: {self.hint}"


class InputError(ThreadlineError):
    exit_code = 2


class EmptyMessage(InputError):
    def __init__(self) -> None:
        super().__init__(
            "the message is empty (or only whitespace); nothing was saved",
            hint="type some text, or leave the chat with /exit",
        )


class MessageTooLarge(InputError):
    def __init__(self, size: int, limit: int) -> None:
        super().__init__(
            f"the message is {size:,} bytes, over the limit of {limit:,} bytes; nothing was saved",
            hint="send a shorter message, or raise THREADLINE_MAX_MESSAGE_BYTES",
        )
        self.size = size
        self.limit = limit


class InvalidEncoding(InputError):
    def __init__(self, where: str, err: UnicodeDecodeError) -> None:
        bad = err.object[err.start : err.start + 1].hex()
        super().__init__(
            f"{where} is not valid UTF-8 (byte 0x{bad} at offset {err.start}); nothing was saved",
            hint="convert the input to UTF-8, e.g. with iconv -t UTF-8",
        )


class ClientMessageConflict(InputError):
    def __init__(self, client_msg_id: str, detail: str) -> None:
        super().__init__(
            f"client message id {client_msg_id!r} was already used for {detail}; nothing was saved",
            hint="generate a fresh client message id for a new message",
        )


class ImportFormatError(InputError):
    """A whole import file is unusable (a malformed record is reported and skipped instead)."""


class NotFound(ThreadlineError):
    exit_code = 3


class UnknownConversation(NotFound):
    def __init__(self, conversation_id: str) -> None:
        super().__init__(
            f"no conversation with id {conversation_id!r}",
            hint="list conversations with: threadline conversations list",
        )
        self.conversation_id = conversation_id


class UnknownBranch(NotFound):
    def __init__(self, conversation_id: str, branch: str) -> None:
        super().__init__(
            f"conversation {conversation_id} has no branch {branch!r}",
            hint=f"list its branches with: threadline conversations show {conversation_id}",
        )


class UnknownItem(NotFound):
    def __init__(self, conversation_id: str, seq: int) -> None:
        super().__init__(
            f"conversation {conversation_id} has no item {seq}",
            hint=f"see item numbers with: threadline conversations show {conversation_id}",
        )


class UnknownCall(NotFound):
    def __init__(self, call_id: str) -> None:
        super().__init__(
            f"no model call with id {call_id!r}",
            hint="list a conversation's calls with: threadline calls list CONVERSATION",
        )


class UnknownCorpus(NotFound):
    def __init__(self, name: str) -> None:
        super().__init__(f"no corpus named {name!r}",
                         hint="list corpora with: threadline corpus list; add one with: "
                              "threadline corpus add NAME PATH...")


class StoreError(ThreadlineError):
    exit_code = 4


class NotAThreadlineDatabase(StoreError):
    def __init__(self, path: str, detail: str) -> None:
        super().__init__(
            f"{path} is not a threadline database ({detail}); it was not modified",
            hint="point THREADLINE_HOME at a threadline data directory, or move the file away",
        )


class SchemaTooNew(StoreError):
    def __init__(self, path: str, found: int, supported: int) -> None:
        super().__init__(
            f"{path} has schema version {found}, newer than this threadline supports "
            f"({supported}); it was not modified",
            hint="upgrade threadline (pip install -U threadline) to open this database",
        )


class StoreReadOnly(StoreError):
    def __init__(self, path: str, detail: str) -> None:
        super().__init__(
            f"cannot write to {path} ({detail}); nothing was saved",
            hint="make the directory writable, or set THREADLINE_HOME to a writable directory",
        )


class ConflictError(ThreadlineError):
    exit_code = 5


class TurnSuperseded(ConflictError):
    def __init__(self, conversation_id: str, branch: str, expected: int | None, found: int | None):
        super().__init__(
            f"branch {branch!r} of {conversation_id} moved while the turn ran "
            f"(expected head {expected}, found {found}); the reply was not appended",
            hint="send the message again; it will be answered against the newer history",
        )
        self.expected = expected
        self.found = found


class TurnInProgress(ConflictError):
    """Another turn holds the conversation and the caller chose not to wait (or waited too
    long); nothing was written."""

    def __init__(self, conversation_id: str, retry_after_s: float, *, waited: bool = False):
        super().__init__(
            f"conversation {conversation_id} is answering another message"
            + (" and did not finish in time" if waited else ""),
            hint=f"retry in about {retry_after_s:.0f} s, or send with on_busy='queue'")
        self.retry_after_s = retry_after_s


class TurnCancelled(ConflictError):
    """A newer message asked this turn to stop; its call is recorded as cancelled."""

    def __init__(self, conversation_id: str):
        super().__init__(f"the turn on {conversation_id} was cancelled by a newer message",
                         hint="the newer message is answered with this one's history")


class ModelError(ThreadlineError):
    exit_code = 6
    # set by a backend that got as far as building its request: the request exactly as it
    # was sent (a ``calls.SentRequest``), so the failed call's record holds the real payload
    sent_request: object | None = None


class ModelUnavailable(ModelError):
    pass


class ContextWindowExceeded(ModelError):
    def __init__(self, prompt_tokens: int, window: int, reserved: int) -> None:
        super().__init__(
            f"the request is {prompt_tokens:,} tokens; with {reserved:,} reserved for the reply it "
            f"does not fit the model's {window:,}-token context window",
            hint="fork the conversation from an earlier item, or start a new one with --new",
        )
        self.prompt_tokens = prompt_tokens
        self.window = window


class PromptTooLong(ModelError):
    """The provider refused the request as longer than its context window (its own count)."""

    def __init__(self, provider: str, detail: str) -> None:
        super().__init__(
            f"{provider} refused the request as too long for the model's context window "
            f"({detail}); the turn is recorded as failed",
            hint="compact the conversation (threadline conversations compact), fork it from "
                 "an earlier item, or start a new one with --new",
        )
        self.detail = detail


_RETRY = ("the turn is recorded as failed; answer it again (the same --client-msg-id, or "
          "/retry in chat) and the message is not sent twice")


class ProviderError(ModelError):
    """A hosted model answered the call with an error; ``status`` is its HTTP status (None for
    an error sent mid-stream) and ``error_type`` the type it named."""

    def __init__(self, message: str, *, status: int | None = None, error_type: str | None = None,
                 hint: str | None = None) -> None:
        super().__init__(message, hint=hint or _RETRY)
        self.status = status
        self.error_type = error_type


class ProviderOverloaded(ProviderError):
    exit_code = 7

    def __init__(self, provider: str, detail: str, *, status: int | None = None) -> None:
        super().__init__(f"{provider} is overloaded and did not answer ({detail})",
                         status=status, error_type="overloaded_error",
                         hint=f"retry in a minute: {_RETRY}")


class ProviderRateLimited(ProviderError):
    exit_code = 7

    def __init__(self, provider: str, detail: str, *, retry_after_s: float | None,
                 status: int | None = None) -> None:
        when = "later" if retry_after_s is None else f"in {retry_after_s:g} s"
        super().__init__(f"{provider} rate-limited the call ({detail}); it asks to retry {when}",
                         status=status, error_type="rate_limit_error",
                         hint=f"retry {when}: {_RETRY}")
        self.retry_after_s = retry_after_s


class ProviderAuthFailed(ProviderError):
    def __init__(self, provider: str, detail: str, *, key_env: str, status: int | None = None,
                 error_type: str | None = None) -> None:
        super().__init__(f"{provider} did not accept the API key ({detail}); nothing was answered",
                         status=status, error_type=error_type,
                         hint=f"set {key_env} to a valid key for this endpoint, then retry: "
                              f"{_RETRY}")


class ModelCallFailed(ModelError):
    def __init__(self, call_id: str, cause: BaseException) -> None:
        super().__init__(
            f"the model call failed ({type(cause).__name__}: {cause}); "
            f"the turn is recorded as failed in call {call_id}",
            hint="retry with the same --client-msg-id; the message will not be duplicated",
        )
        self.call_id = call_id
        self.cause = cause


class AccessDenied(ThreadlineError):
    exit_code = 8


class Unauthorized(AccessDenied):
    """The request carries no bearer token the service accepts; nothing was read or written."""


class Forbidden(AccessDenied):
    """The token is valid but may not use what the request names; nothing was written."""
