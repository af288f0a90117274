# sym->implied while sym_calc_value() works out a value: host gdb on the
# kernel's own conf, not on the guest kernel. Kconfig runs on the host, so
# this walkthrough is a host test (stages/05-kconfig-imply/host-tests):
# host_gdb.py builds conf with -g -O0, writes the "# config:" lines to a
# .config, runs conf with the "# run:" arguments under gdb -batch, and
# checks the "# expect:" lines in order.
#
# The Kconfig is the stage's imply test (scripts/kconfig/tests/imply): the
# documentation's FOO implies BAZ, which depends on BAR; and DRIVER_A and
# DRIVER_B both imply SUBSYS. The walkthrough stops in sym_calc_value() at
# the line that ORs the implied value into the default, for BAZ and for
# SUBSYS, and prints what only the running conf holds: the expression
# menu_finalize() built in sym->implied, its value, the direct dependency,
# and newval before the OR, after the OR and after the AND with the
# dependency. Each stop adds a line to $LAB_OUT/implied.txt.
#
# config: CONFIG_FOO=y
# config: CONFIG_BAR=m
# config: CONFIG_DRIVER_A=y
# config: CONFIG_DRIVER_B=m
# run: --olddefconfig scripts/kconfig/tests/imply/Kconfig
# expect: stop in sym_calc_value\(\) for (BAZ|SUBSYS) at symbol\.c:\d+
# expect: summary:
# expect: BAZ: implied = FOO, implied\.tri = yes, dir_dep = BAR, dir_dep\.tri = mod, rev_dep\.tri = no
# expect: BAZ: newval\.tri = no before the OR, yes after it, mod after the AND with dir_dep
# expect: BAZ: sym_calc_value\(\) returned, curr\.tri = mod
# expect: SUBSYS: implied = DRIVER_A \|\| DRIVER_B, implied\.tri = yes, dir_dep = \(none\), dir_dep\.tri = yes, rev_dep\.tri = no
# expect: SUBSYS: newval\.tri = no before the OR, yes after it, yes after the AND with dir_dep
# expect: SUBSYS: sym_calc_value\(\) returned, curr\.tri = yes

python
import os
import re

WATCHED = ("BAZ", "SUBSYS")


def symbol_c():
    """The stage's scripts/kconfig/symbol.c, as conf was built from it."""
    return gdb.lookup_global_symbol("sym_calc_value").symtab.fullname()


def line_of(text):
    """The line of symbol.c holding text, inside sym_calc_value()."""
    lines = open(symbol_c()).read().splitlines()
    start = next(i for i, l in enumerate(lines) if l.startswith("void sym_calc_value("))
    return next(i + 1 for i in range(start, len(lines)) if text in lines[i])


def expr_text(expr):
    """A Kconfig expression as Kconfig writes it."""
    if int(expr) == 0:
        return "(none)"
    e = expr.dereference()
    kind = str(e["type"])
    if kind == "E_SYMBOL":
        return e["left"]["sym"]["name"].string()
    if kind == "E_NOT":
        return "!" + expr_text(e["left"]["expr"])
    ops = {"E_AND": "&&", "E_OR": "||"}
    if kind in ops:
        return f"{expr_text(e['left']['expr'])} {ops[kind]} {expr_text(e['right']['expr'])}"
    return kind


notes = {}


def note(name, line):
    gdb.write(line + "\n")
    notes.setdefault(name, []).append(line)


class ImpliedOr(gdb.Breakpoint):
    """The OR of sym->implied into the default, once for each watched
    symbol: conf computes a symbol again whenever its inputs change."""

    def stop(self):
        name = gdb.parse_and_eval("sym")["name"].string()
        return name in WATCHED and name not in notes


or_line = line_of("newval.tri = EXPR_OR(newval.tri, sym->implied.tri);")
implied_or = ImpliedOr(f"symbol.c:{or_line}")


def walk_one():
    sym = gdb.parse_and_eval("sym")
    name = sym["name"].string()
    gdb.write(f"stop in sym_calc_value() for {name} at symbol.c:{or_line}\n")
    gdb.execute("print sym->implied")
    note(name, f"{name}: implied = {expr_text(sym['implied']['expr'])}, "
         f"implied.tri = {sym['implied']['tri']}, "
         f"dir_dep = {expr_text(sym['dir_dep']['expr'])}, "
         f"dir_dep.tri = {sym['dir_dep']['tri']}, "
         f"rev_dep.tri = {sym['rev_dep']['tri']}")
    before = str(gdb.parse_and_eval("newval.tri"))
    gdb.execute("next")
    after_or = str(gdb.parse_and_eval("newval.tri"))
    gdb.execute("next")
    after_and = str(gdb.parse_and_eval("newval.tri"))
    note(name, f"{name}: newval.tri = {before} before the OR, {after_or} after it, "
         f"{after_and} after the AND with dir_dep")
    gdb.set_convenience_variable("watched", sym)
    gdb.execute("finish")
    curr = gdb.parse_and_eval("$watched->curr.tri")
    note(name, f"{name}: sym_calc_value() returned, curr.tri = {curr}")


def summary():
    """The stops in a fixed order (conf walks its symbols in hash order)."""
    lines = []
    for name in WATCHED:
        lines += notes.get(name, [f"{name}: sym_calc_value() never used its implied value"])
    text = "\n".join(lines) + "\n"
    gdb.write("summary:\n" + text)
    out = os.environ.get("LAB_OUT")
    if out:
        with open(os.path.join(out, "implied.txt"), "w") as f:
            f.write(text)


gdb.execute("run")
while gdb.selected_inferior().pid and len(notes) < len(WATCHED):
    walk_one()
    if len(notes) < len(WATCHED):
        gdb.execute("continue")
summary()
end

delete
continue
