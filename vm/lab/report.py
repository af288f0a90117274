"""A class's grades as a CSV (for the gradebook) and one HTML page (to read):
per-exercise results per student, the console tail of every failure, and
the class-wide pass rate of each exercise. Console text is the students'
kernels talking, so every byte of it is escaped."""
import csv
import html
from datetime import datetime, timezone

from . import settings


def write(out, stage, names, verdicts):
    write_csv(out / "grades.csv", names, verdicts)
    write_html(out / "report.html", stage, names, verdicts)


def write_csv(path, names, verdicts):
    with open(path, "w", newline="") as handle:
        table = csv.writer(handle)
        table.writerow(["student", "status", "passed", "total", *names, "reason", "notes",
                        "hints shown"])
        for verdict in verdicts:
            table.writerow([verdict.student, verdict.status, verdict.passed, len(names),
                            *("PASS" if verdict.result_of(name) else "FAIL" for name in names),
                            verdict.reason, "; ".join(verdict.notes),
                            hints_shown(verdict)])


def hints_shown(verdict):
    """'rule-match 2, uid-range-in 1': each exercise and how many hints it took."""
    return ", ".join(f"{name} {count}" for name, count in sorted(verdict.hints.items()))


def pass_rates(names, verdicts):
    """{exercise: fraction of students passing it}."""
    if not verdicts:
        return {name: 0.0 for name in names}
    return {name: sum(v.result_of(name) for v in verdicts) / len(verdicts) for name in names}


def write_html(path, stage, names, verdicts):
    e = html.escape
    rates = pass_rates(names, verdicts)
    head = "".join(f"<th>{e(name)}</th>" for name in names)
    rows = []
    for verdict in verdicts:
        cells = "".join('<td class="pass">pass</td>' if verdict.result_of(name)
                        else '<td class="fail">fail</td>' for name in names)
        rows.append(f'<tr><th><a href="#{e(verdict.student)}">{e(verdict.student)}</a></th>'
                    f"<td>{verdict.passed}/{len(names)}</td>{cells}"
                    f"<td>{e(verdict.reason)}</td><td>{e(hints_shown(verdict))}</td></tr>")
    rate_cells = "".join(f"<td>{rates[name]:.0%}</td>" for name in names)
    failures = []
    for verdict in verdicts:
        bad = [(name, detail) for name, ok, detail in verdict.rows if not ok]
        if not bad and not verdict.notes:
            continue
        items = "".join(f"<li><b>{e(name)}</b>: {e(detail or 'failed')}</li>" for name, detail in bad)
        notes = "".join(f"<p class=note>{e(note)}</p>" for note in verdict.notes)
        tail = (f"<details><summary>console tail</summary><pre>{e(verdict.console_tail)}</pre>"
                f"</details>" if verdict.console_tail else "")
        failures.append(f'<section id="{e(verdict.student)}"><h3>{e(verdict.student)}</h3>'
                        f"{notes}<ul>{items}</ul>{tail}</section>")
    when = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    path.write_text(f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<title>Grades: {e(stage.slug)}</title>
<style>
body {{ font-family: sans-serif; margin: 2em; }}
table {{ border-collapse: collapse; }}
td, th {{ border: 1px solid #999; padding: .2em .5em; text-align: left; }}
td.pass {{ background: #d7f5d7; }} td.fail {{ background: #f8d4d4; }}
tfoot td {{ font-weight: bold; }}
pre {{ background: #f4f4f4; padding: .5em; overflow-x: auto; }}
</style></head><body>
<h1>Grades for stage {e(stage.slug)}: {e(stage.title)}</h1>
<p>{len(verdicts)} submissions, graded by <code>make grade-class</code>; {e(when)}.
The CSV is <a href="grades.csv">grades.csv</a>.</p>
<table><thead><tr><th>student</th><th>passed</th>{head}<th>reason</th><th>hints shown</th></tr></thead>
<tbody>{''.join(rows)}</tbody>
<tfoot><tr><th>pass rate</th><td></td>{rate_cells}<td></td><td></td></tr></tfoot></table>
<h2>Failures</h2>
{''.join(failures) or '<p>None.</p>'}
<p>Each student's full results: <code>{e(settings.shown(path.parent))}/&lt;student&gt;/</code>.</p>
</body></html>
""")
