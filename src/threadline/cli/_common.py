"""What every command shares: settings, the store, the model, the options several commands
take (``--json``, ``--model``, ``--branch``, ``--user``, ``--yes``), confirmation, and output."""

from __future__ import annotations

import atexit
import json
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import click
from click.decorators import FC

from threadline.compaction.constraints import Detector
from threadline.compaction.plan import policy_for
from threadline.engine import Engine
from threadline.errors import InputError
from threadline.memory import MemoryStore
from threadline.memory.dense import MemoryVectors
from threadline.memory.recall import K, MemoryRecall
from threadline.models import MODELS, ModelBackend, create_model
from threadline.providers.monitor import TrajectoryMonitor
from threadline.retrieval.corpus import Corpus
from threadline.settings import Settings
from threadline.standard import constraint_detector, default_monitor, standard_engine
from threadline.stores import MAIN, Store, open_store
from threadline.tracing import from_environment
from threadline.turn.delegate import Delegation, agents_at
from threadline.turn.hooks import TurnHook
from threadline.turn.observe import Observer

if TYPE_CHECKING:  # OpenTelemetry is an extra (otel)
    from threadline.tracing.setup import Tracing


@dataclass
class Context:
    settings: Settings
    _store: Store | None = field(default=None, repr=False)
    _corpora: Corpus | None = field(default=None, repr=False)
    _tracing: Tracing | None = field(default=None, repr=False)
    _traced: bool = field(default=False, repr=False)
    _detector: Detector | None = field(default=None, repr=False)

    def store(self) -> Store:
        if self._store is None:
            self._store = open_store(self.settings)
            _on_close(self._store.close)
        return self._store

    def corpora(self) -> Corpus:
        """The corpora kept beside the log, in the same database."""
        store = self.store()
        if store.corpora is None:
            raise InputError(f"{type(store).__name__} keeps no corpora")
        if self._corpora is None:
            self._corpora = Corpus(store)
        return self._corpora

    def memory(self) -> MemoryStore:
        """What is remembered about users, kept beside the log."""
        store = self.store()
        if store.memory is None:
            raise InputError(f"{type(store).__name__} keeps no memory")
        return MemoryStore(store)

    def vectors(self, dense: bool = False) -> MemoryVectors | None:
        """Memory embeddings, when asked for or set (THREADLINE_MEMORY_DENSE)."""
        return MemoryVectors(self.memory()) if dense or self.settings.memory_dense else None

    def recall(self, *, k: int = K, threshold: float | None = None,
               dense: bool = False) -> MemoryRecall:
        return MemoryRecall(self.memory(), k=k, threshold=threshold,
                            dense=self.vectors(dense))

    def constraint_detector(self) -> Detector:
        """What finds standing constraints before a compaction, as the settings say
        (THREADLINE_CONSTRAINT_CLASSIFIER), made once for the command."""
        if self._detector is None:
            self._detector = constraint_detector(self.settings.constraint_classifier)
        return self._detector

    def model(self, name: str | None = None) -> ModelBackend:
        return create_model(name or self.settings.model, self.settings)

    def monitor(self, embeddings: bool | None = None,
                intent: bool | None = None) -> TrajectoryMonitor:
        """The trajectory monitor the settings ask for: the rules, the embedding detector
        (``embeddings``, else the setting) with its intent classifier if ``intent`` (else
        THREADLINE_MONITOR_INTENT) says so, and, where THREADLINE_MONITOR_CLASSIFIER names a
        backend, the model classifier on it (built and loaded here, before any turn)."""
        name = self.settings.monitor_classifier
        return default_monitor(self.settings.monitor_embeddings if embeddings is None
                               else embeddings,
                               intent=self.settings.monitor_intent if intent is None
                               else intent,
                               classifier=None if name is None else self.model(name))

    def tracing(self) -> Tracing | None:
        """The traces the OTEL_* environment asks for (off unless it does;
        docs/observability.md), set up once for the command."""
        if not self._traced:
            self._tracing, self._traced = from_environment(), True
            if self._tracing is not None:  # what is left is exported as the command ends
                _on_close(self._tracing.shutdown)
        return self._tracing

    def engine(self, model: ModelBackend, *, system: str | None = None,
               hooks: Sequence[TurnHook] = (), observer: Observer | None = None) -> Engine:
        """An engine over this store with the standard providers and hooks (recall with the
        settings' dense choice), compacting on its own where the model has a window (standing
        constraints found as the settings say); then
        ``hooks``, and ``observer`` told what happens beside the turns; traced where the
        environment asks for it."""
        tracing = self.tracing()
        settings, store = self.settings, self.store()
        return standard_engine(store, model, system=system or settings.system_prompt,
                               max_message_bytes=settings.max_message_bytes,
                               time_in_context=settings.time_in_context,
                               remind_every=settings.remind_every, remind=settings.remind,
                               monitor=self.monitor() if settings.monitor else False,
                               policy=policy_for(model), corpora=self._corpora,
                               recall=self.recall() if store.memory is not None else False,
                               constraints=self.constraint_detector(),
                               hooks=hooks, observer=observer, tracer=tracing,
                               agents=() if settings.agents is None
                               else agents_at(settings.agents),
                               delegation=None if settings.delegation is None
                               else Delegation(*settings.delegation))


pass_context = click.make_pass_decorator(Context)


def _on_close(close: Callable[[], object]) -> None:
    """Run ``close`` as the command ends; outside a command (a ``serve --workers`` worker,
    which builds its service from the environment) as the process exits."""
    command = click.get_current_context(silent=True)
    if command is None:
        atexit.register(close)
    else:
        command.call_on_close(close)


# -- options shared by several commands -----------------------------------------------------

def json_option(help: str = "Print JSON.") -> Callable[[FC], FC]:
    """``--json``, passed as ``as_json``."""
    return click.option("--json", "as_json", is_flag=True, help=help)


def billing_options(what: str = "Cache profile to bill under (see: threadline cost profiles)."
                    ) -> Callable[[FC], FC]:
    """``--profile`` (passed as ``profile_name``) and ``--input-price``: how recorded calls
    are billed, the same way in every command that prices them."""
    def decorate(command: FC) -> FC:
        command = click.option("--input-price", type=click.FloatRange(min=0), default=3.0,
                               show_default=True, metavar="USD_PER_MTOK",
                               help="List price of input tokens, USD per million.")(command)
        return click.option("--profile", "profile_name", default="anthropic-5m",
                            show_default=True, help=what)(command)
    return decorate


def model_option(help: str = "Model backend.", *,
                 default: str = "$THREADLINE_MODEL, else local") -> Callable[[FC], FC]:
    """``--model``, one of threadline's model backends, passed as ``model_name``; ``help``
    says what the command uses it for."""
    return click.option("--model", "model_name", type=click.Choice(sorted(MODELS)),
                        help=f"{help} Default: {default}.")


def branch_option(help: str | None = None, *, default: str | None = MAIN) -> Callable[[FC], FC]:
    """``--branch``: the branch to act on (default main), or with ``default=None`` a filter
    that is off unless given."""
    return click.option("--branch", default=default, show_default=default is not None,
                        help=help)


def user_option(help: str = "Whose memory.", *, required: bool = True) -> Callable[[FC], FC]:
    """``--user U``, passed as ``user_id``."""
    return click.option("--user", "user_id", required=required, metavar="U", help=help)


def yes_option() -> Callable[[FC], FC]:
    """``--yes``, for every destructive command; see :func:`confirm`."""
    return click.option("--yes", is_flag=True, help="Do not ask for confirmation (needed when "
                                                    "standard input is not a terminal).")


# -- confirmation and output ----------------------------------------------------------------

def stdin_is_terminal() -> bool:
    return sys.stdin.isatty()


def confirm(action: str, yes: bool) -> None:
    """The one rule for destructive commands: with --yes go ahead; at a terminal ask
    "``action``?" (no aborts); with no terminal to ask on, refuse, before anything changed."""
    if yes:
        return
    if not stdin_is_terminal():
        raise InputError(f"refusing to {action} without confirmation (standard input is not a "
                         "terminal); nothing was changed", hint="pass --yes to confirm")
    click.confirm(f"{action}?", abort=True)


def output(value: Any, as_json: bool, human: str | Callable[[], object]) -> None:
    """What a command prints: ``value`` as JSON with --json, else ``human`` (a line, or a
    function that prints the human-readable form)."""
    if as_json:
        emit_json(value)
    elif callable(human):
        human()
    else:
        click.echo(human)


def emit_json(value: Any) -> None:
    click.echo(json.dumps(value, ensure_ascii=False, indent=2))


def table(rows: list[list[str]], headers: list[str]) -> None:
    """A plain left-aligned table; the last column is left unpadded."""
    widths = [max(len(str(r[i])) for r in [headers, *rows]) for i in range(len(headers) - 1)]
    for row in [headers, *rows]:
        cells = [str(cell).ljust(widths[i]) for i, cell in enumerate(row[:-1])]
        click.echo("  ".join([*cells, str(row[-1])]).rstrip())


def one_line(text: str, width: int = 72) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"
