"""Hand-written statements against the ORM doing the same writes and reads, side by side.

``memory.core.rows`` and its callers write an outcome's row, its stored answer, its
evidence links and its project label in statements of their own instead of through
the ORM. Each case here runs both ways on the same rows, interleaved in short rounds
(so a busy neighbour on the machine slows both alike), with commits that do not
wait for the disk (the flush is the same for both and would swamp them), and reports the median time
per operation and the ratio ORM / hand-written. A ratio under 1.3 means the
hand-written statement does not earn its keep.

Bounded: ``--ops`` operations per variant (default 300), well under a minute on a
shared 2-core machine. Writes to a database of its own (``cairn_bench_rows``),
dropped at the end. Usage:
    python -m cairn.embedded run -- python bench/bench_rows.py [--ops 300] [--json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from itertools import count
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import RESULTS, drop_database, machine, setup_django  # noqa: E402

DATABASE = "cairn_bench_rows"
ROUND = 25  # operations of one variant before the other takes its turn


def _median_us(samples: list[float]) -> float:
    return statistics.median(samples) * 1e6


def _race(variants: dict, ops: int) -> dict[str, float]:
    """Median seconds per call of each variant, run in interleaved rounds."""
    samples: dict[str, list[float]] = {name: [] for name in variants}
    for fn in variants.values():  # warm: statements compiled, caches filled
        for _ in range(5):
            fn()
    done = 0
    while done < ops:
        for name, fn in variants.items():
            for _ in range(ROUND):
                start = time.perf_counter()
                fn()
                samples[name].append(time.perf_counter() - start)
        done += ROUND
    return {name: _median_us(s) for name, s in samples.items()}


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ops", type=int, default=300)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--quick", action="store_true", help="50 operations, no results file")
    args = parser.parse_args(argv)
    ops = 50 if args.quick else max(ROUND, min(args.ops, 2000))

    setup_django(DATABASE)
    try:
        results = _run(ops)
        info = machine()
    finally:
        from django.db import connections

        connections.close_all()
        drop_database(DATABASE)
    if args.json:
        print(json.dumps({"ops": ops, "machine": info, "cases": results}, indent=2))
    else:
        print(f"{ops} operations per variant, median per operation")
        for case in results:
            print(
                f"  {case['case']:<44} hand-written {case['raw_us']:7.0f} us"
                f"   ORM {case['orm_us']:7.0f} us   ORM/raw {case['ratio']:.2f}x"
            )
    if not args.quick:
        RESULTS.mkdir(parents=True, exist_ok=True)
        (RESULTS / "rows.md").write_text(_markdown(ops, results, info))
    return 0


def _markdown(ops: int, results: list[dict], info: dict) -> str:
    lines = [
        "# Hand-written statements against the ORM (bench/bench_rows.py)",
        "",
        f"{ops} operations per variant, interleaved in rounds of {ROUND}; median per operation;",
        "commits do not wait for the disk (the same flush for both). Machine: "
        + ", ".join(f"{k} {v}" for k, v in info.items()),
        "",
        "| case | hand-written (us) | ORM (us) | ORM / hand-written |",
        "|---|---:|---:|---:|",
    ]
    lines += [
        f"| {c['case']} | {c['raw_us']} | {c['orm_us']} | {c['ratio']:.2f}x |" for c in results
    ]
    return "\n".join(lines) + "\n"


def _run(ops: int) -> list[dict]:
    from django.db import connection, transaction
    from django.utils import timezone

    from memory.core.rows import PreparedQuery, row_insert, row_insert_keyed
    from memory.identity.projects import project_label_from_remote_ctes
    from memory.identity.services import agent_get_or_create, workspace_get_or_create
    from memory.lessons.evidence_links import lesson_evidence_links_cte
    from memory.lessons.promotion import promotion_twins_exist
    from memory.models import AuditEvent, Lesson, LessonEvidence, Outcome, ProjectLabel

    # Each operation keeps its own statements and commits, as on the hot path, but the
    # commit does not wait for the disk: the WAL flush, the same for both variants,
    # would otherwise swamp the difference on a shared machine.
    with connection.cursor() as cursor:
        cursor.execute("SET synchronous_commit = off")
    workspace = workspace_get_or_create(name="bench-rows")
    agent = agent_get_or_create(workspace=workspace, name="bench")
    lessons = [
        Lesson.objects.create(
            workspace=workspace,
            text=f"Run the tests before committing, variant {i}.",
            normalized_text=f"run the tests before committing variant {i}",
            operation_key="pytest",
            scope="global",
            confidence=0.6,
            birth_confidence=0.6,
            state="active",
            source="loop",
        )
        for i in range(4)
    ]
    lesson_ids = [lesson.pk for lesson in lessons]
    serial = count()
    digest = "d" * 64

    def outcome() -> Outcome:
        n = next(serial)
        return Outcome(
            workspace_id=workspace.pk,
            agent=agent,
            outcome_id=f"o-{n}",
            session_id="s",
            turn_index=n,
            project_digest=digest,
            approach=[{"operation_key": "pytest", "outcome": "ok", "step": 1}],
            checks=[{"kind": "test", "exit_code": 0}],
            in_play=[{"type": "lesson", "id": pk} for pk in lesson_ids[:2]],
            passed=True,
            channel="harness",
            response={"confirmed": [], "contradicted": [], "lessons_created": []},
        )

    def orm_keyed(o: Outcome) -> None:
        # The ORM path to "a row whose stored answer names its own id": insert, then update.
        with transaction.atomic():
            o.save(force_insert=True)
            o.response["id"] = o.pk
            Outcome.objects.filter(pk=o.pk).update(response=o.response)

    links = [(pk, LessonEvidence.Relation.SUPPORTS) for pk in lesson_ids[:2]]

    def orm_links(o: Outcome, now) -> None:
        LessonEvidence.objects.bulk_create(
            [
                LessonEvidence(lesson_id=pk, outcome=o, relation=r, created_at=now)
                for pk, r in links
            ],
            ignore_conflicts=True,
        )

    def project(n: int) -> str:
        return f"{n:064x}"

    def orm_label(digest: str, label: str) -> None:
        made = ProjectLabel.objects.bulk_create(
            [
                ProjectLabel(
                    workspace=workspace,
                    project_digest=digest,
                    label=label,
                    updated_by="harness:bench",
                    updated_at=timezone.now(),
                )
            ],
            ignore_conflicts=True,
        )
        if made and made[0].pk:  # written now (bulk_create leaves pk None on a conflict)
            AuditEvent.objects.create(
                workspace=workspace,
                actor="harness:bench",
                action="project.label_from_remote",
                target_type="project",
                target_id=digest,
            )

    table = connection.ops.quote_name(Outcome._meta.db_table)
    stored = [row_insert(outcome()) for _ in range(50)]

    def raw_update() -> None:
        o = stored[next(serial) % len(stored)]
        with connection.cursor() as cursor:
            cursor.execute(
                f"UPDATE {table} SET response = %s WHERE id = %s", [json.dumps(o.response), o.pk]
            )

    def orm_update() -> None:
        o = stored[next(serial) % len(stored)]
        Outcome.objects.filter(pk=o.pk).update(response=o.response)

    def build(workspace_id, ids):
        rows = Lesson.objects.filter(workspace_id=workspace_id, pk__any=ids)
        rows = rows.select_for_update(no_key=True, of=("self",))
        return rows.annotate(twins=promotion_twins_exist()).order_by("pk")

    prepared = PreparedQuery(build, ints=("workspace_id",), lists=("ids",))

    def prepared_read() -> None:
        with transaction.atomic():
            assert len(prepared.rows(workspace_id=workspace.pk, ids=lesson_ids)) == 4

    def orm_read() -> None:
        with transaction.atomic():
            assert len(list(build(workspace.pk, lesson_ids))) == 4

    def first_label(cte: bool):
        def run() -> None:
            n = next(serial)
            o = outcome()
            remote = f"github.com/bench/repo{n}"
            o.project_digest = project(n)
            if cte:
                label = project_label_from_remote_ctes(
                    workspace_id=workspace.pk,
                    project_digest=o.project_digest,
                    remote=remote,
                    author="harness:bench",
                )
                row_insert_keyed(o, key_into="response", also=label)
            else:
                with transaction.atomic():
                    orm_keyed(o)
                    orm_label(o.project_digest, f"repo{n}")

        return run

    def labelled(cte: bool):
        # The usual case: the project has its label already, nothing more is written.
        def run() -> None:
            o = outcome()
            if cte:
                label = project_label_from_remote_ctes(
                    workspace_id=workspace.pk,
                    project_digest=digest,
                    remote="github.com/bench/repo",
                    author="harness:bench",
                )
                row_insert_keyed(o, key_into="response", also=label)
            else:
                with transaction.atomic():
                    orm_keyed(o)
                    orm_label(digest, "repo")

        return run

    def with_links(cte: bool):
        def run() -> None:
            o = outcome()
            now = timezone.now()
            if cte:
                row_insert_keyed(
                    o, key_into="response", also=lesson_evidence_links_cte(links=links, now=now)
                )
            else:
                with transaction.atomic():
                    orm_keyed(o)
                    orm_links(o, now)

        return run

    labelled(True)()  # the project's label exists before the "labelled" case
    cases = [
        (
            "rows.row_insert vs bulk_create",
            lambda: row_insert(outcome()),
            lambda: Outcome.objects.bulk_create([outcome()]),
        ),
        (
            "rows.row_insert vs Model.objects.create",
            lambda: row_insert(outcome()),
            lambda: Outcome.objects.create(**_fields(outcome())),
        ),
        (
            "rows.row_insert_keyed: row naming its id",
            lambda: row_insert_keyed(outcome(), key_into="response"),
            lambda: orm_keyed(outcome()),
        ),
        ("+ lesson_evidence_links_cte (2 links)", with_links(True), with_links(False)),
        ("+ project label, labelled project", labelled(True), labelled(False)),
        ("+ project label, first of a project", first_label(True), first_label(False)),
        ("outcomes: UPDATE response", raw_update, orm_update),
        ("rows.PreparedQuery: locked in-play read", prepared_read, orm_read),
    ]
    results = []
    for name, raw, orm in cases:
        medians = _race({"raw": raw, "orm": orm}, ops)
        results.append(
            {
                "case": name,
                "raw_us": round(medians["raw"]),
                "orm_us": round(medians["orm"]),
                "ratio": round(medians["orm"] / medians["raw"], 2),
            }
        )
    return results


def _fields(obj) -> dict:
    return {
        f.attname: getattr(obj, f.attname)
        for f in type(obj)._meta.concrete_fields
        if not f.primary_key
    }


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
