"""Record every AWS API call a principal makes, as the code under test really issues it.

Every botocore client call goes through ``BaseClient._make_api_call`` (paginators and waiters call the client's
methods, which call it), and every presigned URL through ``botocore.signers.generate_presigned_url`` (which
botocore attaches to each client class it creates); :class:`CallRecorder` wraps both for as long as it is
installed, so every call of any client is seen, and every URL presigned by a client created while it is installed. A call is attributed to the principal acting at that moment
(:meth:`CallRecorder.acting_as`); calls made while no principal acts (the test's own set-up) are not recorded.

An *answer* replaces AWS for one operation (``lambda.Invoke`` runs the function's handler in-process,
``cloudformation.DescribeStacks`` returns the template's outputs): moto has no Lambda without Docker and no
stack for this template. An answer may also raise (an error as AWS would answer it), or return ``None`` to let the
call go to moto as usual. Answered calls are recorded like any other.
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import botocore.client
import botocore.signers

Answer = Callable[[dict[str, Any]], dict[str, Any] | None]


@dataclass(frozen=True)
class RecordedCall:
    """One API call: ``principal`` made ``service``.``operation`` (botocore names, e.g. ``dynamodb``,
    ``TransactWriteItems``) with ``params`` in ``region``, during ``scenario``; ``presigned`` when it was a URL
    signed for someone else to send (AWS checks it against the signer's permissions when it is used)."""

    principal: str
    scenario: str
    service: str
    operation: str
    region: str
    params: dict[str, Any]
    presigned: bool = False

    def describe(self) -> str:
        kind = "presigned " if self.presigned else ""
        return f"{kind}{self.service}.{self.operation} ({self.scenario})"


@dataclass
class CallRecorder:
    """Installed with ``with recorder.installed():``; ``calls`` holds what every principal called.

    ``query_workgroups`` maps each query execution id a recorded ``StartQueryExecution`` returned to the workgroup
    it ran in (Athena authorizes ``GetQueryExecution``/``GetQueryResults`` on the query's workgroup).
    """

    calls: list[RecordedCall] = field(default_factory=list)
    answers: dict[tuple[str, str], Answer] = field(default_factory=dict)
    query_workgroups: dict[str, str] = field(default_factory=dict)
    _principals: list[tuple[str, str]] = field(default_factory=list)

    @contextlib.contextmanager
    def acting_as(self, principal: str, scenario: str) -> Iterator[None]:
        """Attribute the calls made inside the block to ``principal`` (nested blocks win: an operator's
        ``Invoke`` runs the function as the function's principal)."""
        self._principals.append((principal, scenario))
        try:
            yield
        finally:
            self._principals.pop()

    def answer(self, service: str, operation: str, answer: Answer) -> None:
        """Answer ``service.operation`` with ``answer(params)`` instead of sending it (``None``: send it)."""
        self.answers[(service, operation)] = answer

    def of(self, principal: str) -> list[RecordedCall]:
        return [call for call in self.calls if call.principal == principal]

    @contextlib.contextmanager
    def installed(self) -> Iterator[CallRecorder]:
        original_call = botocore.client.BaseClient._make_api_call
        original_presign = botocore.signers.generate_presigned_url
        recorder = self

        def make_api_call(client: Any, operation_name: str, api_params: dict[str, Any]) -> Any:
            service = client.meta.service_model.service_name
            recorder._record(client, service, operation_name, api_params, presigned=False)
            answer = recorder.answers.get((service, operation_name)) if recorder._principals else None
            response = answer(api_params) if answer is not None else None
            if response is None:
                response = original_call(client, operation_name, api_params)
            if service == "athena" and operation_name == "StartQueryExecution":
                recorder.query_workgroups[response["QueryExecutionId"]] = api_params.get("WorkGroup", "primary")
            return response

        def generate_presigned_url(client: Any, ClientMethod: str, Params: Any = None, **kwargs: Any) -> Any:
            operation = client._PY_TO_OP_NAME.get(ClientMethod, ClientMethod)
            service = client.meta.service_model.service_name
            recorder._record(client, service, operation, dict(Params or {}), presigned=True)
            return original_presign(client, ClientMethod, Params=Params, **kwargs)

        botocore.client.BaseClient._make_api_call = make_api_call  # type: ignore[method-assign]
        botocore.signers.generate_presigned_url = generate_presigned_url
        try:
            yield self
        finally:
            botocore.client.BaseClient._make_api_call = original_call  # type: ignore[method-assign]
            botocore.signers.generate_presigned_url = original_presign

    def _record(self, client: Any, service: str, operation: str, params: dict[str, Any], *, presigned: bool) -> None:
        if not self._principals:
            return
        principal, scenario = self._principals[-1]
        self.calls.append(
            RecordedCall(
                principal=principal,
                scenario=scenario,
                service=service,
                operation=operation,
                region=client.meta.region_name,
                params=copy.deepcopy(params),
                presigned=presigned,
            )
        )
