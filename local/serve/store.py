"""The demo's stores on disk: a snapshot of its two DynamoDB tables and its results bucket, and back.

``make demo`` runs on a moto server that lives as long as the demo; at its end the demo writes what it
committed here (:func:`export_store`), and ``make serve`` loads it into a fresh moto server
(:func:`import_store`). A snapshot rather than a persistent DynamoDB (DynamoDB Local has ``-dbPath``) keeps
the demo Java-free. Layout of ``<workdir>/store/``::

    manifest.json                    format, created_at, region, table and bucket names, the job catalog
                                     document as the demo prepared it, every table's file and item count,
                                     every object's key, size, SHA-256 and content type, counts
    dynamodb/<table>.jsonl           every item of the table, one per line, as DynamoDB's export to S3
                                     writes DynamoDB JSON: {"Item": {"pk": {"S": "..."}, ...}}
                                     (binary values base64, as on the wire)
                                     https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/S3DataExport.Output.html
    s3/<bucket>/<key>                every object of the results bucket (the rows offloaded under results/)

The export reads with a consistent ``Scan`` (a local export of a quiet store, not a production tool) and
``ListObjectsV2``/``GetObject``; it writes into a temporary sibling directory and renames it into place only
once the manifest is written, so an interrupted export leaves the previous store (or none), never half of one.
The import creates the tables with the runtime's own helpers (:func:`slotlock.table.create_lock_table`, with
the ``history`` index; :func:`athena_refresh.results.create_results_table`), writes the items with
``BatchWriteItem`` 25 at a time (retrying unprocessed items, bounded), checks every object's SHA-256 and puts it.
"""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
import json
import os
import shutil
import time
import uuid
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from athena_refresh.catalog import CATALOG_FORMAT, CatalogError, CatalogQuery, parse_entry
from athena_refresh.results import create_results_table
from athena_refresh.stored import LATEST
from slotlock.table import create_lock_table

STORE_KIND = "athena-refresh-demo-store"
STORE_FORMAT = 1
STORE_DIR = "store"
MANIFEST_FILE = "manifest.json"
BATCH_WRITE_SIZE = 25  # BatchWriteItem's limit
BATCH_WRITE_ATTEMPTS = 8  # unprocessed items are retried this many times, with a short backoff
TABLE_KINDS = ("lock", "results")


class StoreError(RuntimeError):
    """The store cannot be written or read: corrupt, an unknown format, an AWS error (the message says which)."""


class StoreMissingError(StoreError):
    """No store at the path: no demo has run (or it never got as far as committing)."""


# ---- DynamoDB JSON as on the wire (boto3's client gives and takes bytes for B/BS) ---------------------------
def _to_wire(value: Mapping[str, Any]) -> dict[str, Any]:
    """One attribute value from boto3's client form to DynamoDB JSON (binary as base64 text)."""
    ((kind, raw),) = value.items()
    if kind == "B":
        return {"B": base64.b64encode(raw).decode("ascii")}
    if kind == "BS":
        return {"BS": [base64.b64encode(b).decode("ascii") for b in raw]}
    if kind == "M":
        return {"M": {k: _to_wire(v) for k, v in raw.items()}}
    if kind == "L":
        return {"L": [_to_wire(v) for v in raw]}
    return {kind: raw}


def _from_wire(value: Mapping[str, Any]) -> dict[str, Any]:
    """The reverse of :func:`_to_wire`."""
    ((kind, raw),) = value.items()
    if kind == "B":
        return {"B": base64.b64decode(raw)}
    if kind == "BS":
        return {"BS": [base64.b64decode(b) for b in raw]}
    if kind == "M":
        return {"M": {k: _from_wire(v) for k, v in raw.items()}}
    if kind == "L":
        return {"L": [_from_wire(v) for v in raw]}
    return {kind: raw}


def _safe_name(name: str, what: str) -> str:
    """A table or bucket name usable as one path component (both services allow no '/')."""
    if not name or name in (".", "..") or "/" in name or "\\" in name or "\0" in name:
        raise StoreError(f"{what} {name!r} cannot be stored as a file name")
    return name


def _key_parts(key: str) -> list[str]:
    """An object key as path components under ``s3/<bucket>/``; refuses keys that would leave it or clash."""
    parts = key.split("/")
    if not key or any(p in ("", ".", "..") or "\0" in p or "\\" in p for p in parts):
        raise StoreError(f"object key {key!r} cannot be stored as a file path (empty, '.' or '..' segment)")
    return parts


def _utc_now() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


# ---- export ------------------------------------------------------------------------------------------------
def export_store(
    dynamodb: Any,
    s3: Any,
    dest: Path | str,
    *,
    lock_table: str,
    results_table: str,
    bucket: str | None,
    catalog: Mapping[str, Any],
    region: str,
    created_at: str | None = None,
) -> dict[str, Any]:
    """Write every item of both tables and every object of ``bucket`` under ``dest``; returns the manifest.

    ``dynamodb``/``s3``: boto3 clients on the store's endpoint; ``catalog``: the job catalog document
    (:func:`athena_refresh.catalog.catalog_document`) the run used. Replaces a previous store at ``dest`` only
    once the new one is complete (see the module docstring).

    :raises StoreError: an AWS call failed, a name cannot be a file name, or the files cannot be written.
    """
    from botocore.exceptions import BotoCoreError, ClientError

    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    _remove_leftovers(dest)
    tmp = dest.with_name(f".{dest.name}.tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}")
    tmp.mkdir()
    try:
        tables: list[dict[str, Any]] = []
        results_summary: dict[str, dict[str, Any]] = {}
        for kind, name in (("lock", lock_table), ("results", results_table)):
            relative = f"dynamodb/{_safe_name(name, 'table')}.jsonl"
            count = 0
            (tmp / "dynamodb").mkdir(exist_ok=True)
            with open(tmp / relative, "w", encoding="utf-8") as out:
                for item in _scan(dynamodb, name):
                    out.write(json.dumps({"Item": {k: _to_wire(v) for k, v in item.items()}}, sort_keys=True))
                    out.write("\n")
                    count += 1
                    if kind == "results":
                        _summarise_result(results_summary, item)
            tables.append({"name": name, "kind": kind, "file": relative, "items": count})
        objects: list[dict[str, Any]] = []
        if bucket is not None:
            root = tmp / "s3" / _safe_name(bucket, "bucket")
            root.mkdir(parents=True)
            for key in _list_keys(s3, bucket):
                path = root.joinpath(*_key_parts(key))
                response = s3.get_object(Bucket=bucket, Key=key)
                body = response["Body"].read()
                if path.exists():  # "a/b" and "a/b/c" cannot both be files
                    raise StoreError(f"object key {key!r} clashes with another key as a file path")
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_bytes(body)
                objects.append(
                    {
                        "key": key,
                        "file": path.relative_to(tmp).as_posix(),
                        "bytes": len(body),
                        "sha256": hashlib.sha256(body).hexdigest(),
                        "content_type": response.get("ContentType") or "binary/octet-stream",
                    }
                )
        for summary in results_summary.values():
            summary["slots"] = sorted(summary["slots"])
        manifest = {
            "kind": STORE_KIND,
            "format": STORE_FORMAT,
            "created_at": created_at or _utc_now(),
            "region": region,
            "lock_table": lock_table,
            "results_table": results_table,
            "bucket": bucket,
            "catalog": dict(catalog),
            "tables": tables,
            "objects": objects,
            "counts": {
                "lock_items": tables[0]["items"],
                "result_items": tables[1]["items"],
                "objects": len(objects),
                "object_bytes": sum(o["bytes"] for o in objects),
            },
            "results": dict(sorted(results_summary.items())),
        }
        (tmp / MANIFEST_FILE).write_text(json.dumps(manifest, indent=1) + "\n", encoding="utf-8")
        _swap_into_place(tmp, dest)
    except (ClientError, BotoCoreError) as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        raise StoreError(f"could not export the store to {dest}: {exc}") from exc
    except OSError as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        raise StoreError(f"could not write the store to {dest}: {exc}") from exc
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return manifest


def _summarise_result(summary: dict[str, dict[str, Any]], item: Mapping[str, Any]) -> None:
    """Per job: the slots holding a result (generation 1 and manual ones), and where LATEST points."""
    job = item.get("job", {}).get("S")
    slot = item.get("slot", {}).get("S")
    if not isinstance(job, str) or not isinstance(slot, str):
        return
    entry = summary.setdefault(job, {"slots": [], "latest_slot": None})
    if slot == LATEST:
        entry["latest_slot"] = item.get("latest_slot", {}).get("S")
    else:
        entry["slots"].append(slot)


def _scan(dynamodb: Any, table: str) -> Iterator[dict[str, Any]]:
    for page in dynamodb.get_paginator("scan").paginate(TableName=table, ConsistentRead=True):
        yield from page.get("Items", [])


def _list_keys(s3: Any, bucket: str) -> Iterator[str]:
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket):
        for entry in page.get("Contents", []):
            yield entry["Key"]


def _remove_leftovers(dest: Path) -> None:
    """Temporary directories of exports that were killed before they could clean up."""
    for pattern in (f".{dest.name}.tmp-*", f".{dest.name}.old-*"):
        for stale in dest.parent.glob(pattern):
            shutil.rmtree(stale, ignore_errors=True)


def _swap_into_place(tmp: Path, dest: Path) -> None:
    """``tmp`` becomes ``dest``: two renames (a directory cannot replace a non-empty one in one), so a reader
    sees the old store, briefly none, or the new one, never a mix."""
    old = None
    if dest.exists():
        old = dest.with_name(f".{dest.name}.old-{os.getpid()}-{uuid.uuid4().hex[:8]}")
        os.rename(dest, old)
    os.rename(tmp, dest)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


# ---- read --------------------------------------------------------------------------------------------------
def read_manifest(src: Path | str) -> dict[str, Any]:
    """The validated manifest of the store at ``src`` (files present, counts consistent).

    :raises StoreMissingError: no ``manifest.json`` at ``src``. :raises StoreError: it is not a store of this
        format, or a file it names is missing.
    """
    src = Path(src)
    path = src / MANIFEST_FILE
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError as exc:
        raise StoreMissingError(f"no demo results in {src} (no {MANIFEST_FILE})") from exc
    except (OSError, UnicodeDecodeError) as exc:
        raise StoreError(f"{path} cannot be read: {exc}") from exc
    try:
        manifest = json.loads(text)
    except ValueError as exc:
        raise StoreError(f"{path} is not JSON ({exc}): the store is corrupt") from exc
    if not isinstance(manifest, dict) or manifest.get("kind") != STORE_KIND:
        raise StoreError(f"{path} is not a manifest of the demo's store (kind {STORE_KIND!r})")
    if manifest.get("format") != STORE_FORMAT:
        raise StoreError(
            f"{path} is a store of format {manifest.get('format')!r}; this version reads format {STORE_FORMAT}"
        )
    for name in ("created_at", "region", "lock_table", "results_table"):
        if not isinstance(manifest.get(name), str) or not manifest[name]:
            raise StoreError(f"{path}: {name} must be a non-empty string")
    if manifest.get("bucket") is not None and not isinstance(manifest["bucket"], str):
        raise StoreError(f"{path}: bucket must be a string or null")
    if not isinstance(manifest.get("catalog"), dict):
        raise StoreError(f"{path}: catalog must be the job catalog document (an object)")
    tables, objects = manifest.get("tables"), manifest.get("objects")
    if not isinstance(tables, list) or sorted(str(t.get("kind")) for t in tables if isinstance(t, dict)) != sorted(
        TABLE_KINDS
    ):
        raise StoreError(f"{path}: tables must list the lock table and the results table")
    for table in tables:
        if not isinstance(table.get("name"), str) or not isinstance(table.get("items"), int):
            raise StoreError(f"{path}: a table entry lacks its name or item count")
        _inside(src, table.get("file"), path)
    if not isinstance(objects, list) or (objects and manifest.get("bucket") is None):
        raise StoreError(f"{path}: objects must be a list (and need a bucket)")
    for obj in objects:
        if not isinstance(obj, dict) or not isinstance(obj.get("key"), str) or not isinstance(obj.get("sha256"), str):
            raise StoreError(f"{path}: an object entry lacks its key or SHA-256")
        _inside(src, obj.get("file"), path)
    return manifest


def _inside(src: Path, relative: Any, manifest_path: Path) -> Path:
    """``src/relative``, which must exist and stay inside ``src``."""
    if not isinstance(relative, str) or not relative:
        raise StoreError(f"{manifest_path}: an entry names no file")
    path = (src / relative).resolve()
    if src.resolve() not in path.parents:
        raise StoreError(f"{manifest_path}: {relative!r} points outside the store")
    if not path.is_file():
        raise StoreError(f"{manifest_path}: {relative} is missing: the store is incomplete")
    return path


def store_catalog(manifest: Mapping[str, Any]) -> dict[str, CatalogQuery]:
    """The job catalog the demo ran with (job name -> query), validated as the runtime validates it.

    :raises StoreError: the document is not a job catalog of the runtime's format.
    """
    document = manifest["catalog"]
    jobs = document.get("jobs")
    if document.get("format") != CATALOG_FORMAT or not isinstance(jobs, Mapping) or not jobs:
        raise StoreError(f"the store's job catalog is not of format {CATALOG_FORMAT} with at least one job")
    try:
        return {str(name): parse_entry(str(name), jobs[name], "<store manifest>") for name in sorted(jobs)}
    except CatalogError as exc:
        raise StoreError(f"the store's job catalog is invalid: {exc}") from exc


# ---- import ------------------------------------------------------------------------------------------------
def import_store(src: Path | str, dynamodb: Any, s3: Any) -> dict[str, Any]:
    """Create the store's tables and bucket on the endpoint of ``dynamodb``/``s3`` and load every item and
    object; returns the manifest. The tables and bucket must not exist yet.

    :raises StoreMissingError: no store at ``src``. :raises StoreError: corrupt (a line that is not an item,
        a count or a checksum that does not match), or an AWS call failed.
    """
    from botocore.exceptions import BotoCoreError, ClientError

    src = Path(src)
    manifest = read_manifest(src)
    try:
        for table in manifest["tables"]:
            name = table["name"]
            if table["kind"] == "lock":
                create_lock_table(dynamodb, name)
            else:
                create_results_table(dynamodb, name)
            written = _load_items(dynamodb, name, src / table["file"])
            if written != table["items"]:
                raise StoreError(f"{table['file']} holds {written} items, the manifest says {table['items']}")
        bucket = manifest.get("bucket")
        if bucket is not None:
            _create_bucket(s3, bucket, manifest["region"])
            for obj in manifest["objects"]:
                body = (src / obj["file"]).read_bytes()
                if hashlib.sha256(body).hexdigest() != obj["sha256"]:
                    raise StoreError(f"{obj['file']} does not match its SHA-256 in the manifest: the store is corrupt")
                s3.put_object(
                    Bucket=bucket,
                    Key=obj["key"],
                    Body=body,
                    ContentType=str(obj.get("content_type") or "binary/octet-stream"),
                )
    except (ClientError, BotoCoreError) as exc:
        raise StoreError(f"could not load the store {src}: {exc}") from exc
    except OSError as exc:
        raise StoreError(f"could not read the store {src}: {exc}") from exc
    return manifest


def _create_bucket(s3: Any, bucket: str, region: str) -> None:
    if region == "us-east-1":
        s3.create_bucket(Bucket=bucket)
    else:
        s3.create_bucket(Bucket=bucket, CreateBucketConfiguration={"LocationConstraint": region})


def _load_items(dynamodb: Any, table: str, path: Path) -> int:
    written = 0
    batch: list[dict[str, Any]] = []
    with open(path, encoding="utf-8") as lines:
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
                item = {k: _from_wire(v) for k, v in record["Item"].items()}
            except (ValueError, KeyError, TypeError, AttributeError) as exc:
                raise StoreError(
                    f"{path}:{number} is not an item in DynamoDB JSON ({exc!r}): the store is corrupt"
                ) from exc
            batch.append({"PutRequest": {"Item": item}})
            if len(batch) == BATCH_WRITE_SIZE:
                written += _batch_write(dynamodb, table, batch)
                batch = []
    if batch:
        written += _batch_write(dynamodb, table, batch)
    return written


def _batch_write(dynamodb: Any, table: str, requests: list[dict[str, Any]]) -> int:
    """One BatchWriteItem of at most 25 puts, unprocessed items retried (bounded); returns the count."""
    pending = {table: requests}
    for attempt in range(BATCH_WRITE_ATTEMPTS):
        response = dynamodb.batch_write_item(RequestItems=pending)
        pending = {k: v for k, v in (response.get("UnprocessedItems") or {}).items() if v}
        if not pending:
            return len(requests)
        time.sleep(min(1.0, 0.05 * 2**attempt))
    raise StoreError(f"{table}: items still unprocessed after {BATCH_WRITE_ATTEMPTS} BatchWriteItem attempts")
