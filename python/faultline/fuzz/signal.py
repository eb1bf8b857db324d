"""What one program made the kernel and the devices do, as a set of
features (short strings): the fuzzer keeps a program that shows a feature
no earlier program showed.

  - "edge:HEX": a kcov edge of the program's operations (the Outcome's
    `cover`, else the guest's `cover N HEX...` lines; a kernel without
    kcov has none);
  - "relaxed:NAME": a relaxation of the oracle the executor applied;
  - "io:INJECTOR:WHAT:B": the device's I/O profile: reads, writes,
    flushes... and the errors, delays, lost completions and completion
    changes its rules injected, each count bucketed (B, search/feedback's
    bucket: within a factor of 4 is the same);
  - "fired:OP:ACTION": a rule action that fired (error=eio, delay, drop...);
  - "stat:KEY:B": the executor's counters (swapins, pages written...),
    bucketed; times are left out (they measure the host, not the kernel).
"""

from faultline.search.feedback import IGNORED_DIAG, bucket

# A rule's action words, by what they do to an I/O (docs/rules.md).
ACTION_CLASSES = (("error=", "errors"), ("fatal", "errors"), ("reset-fail=", "errors"),
                  ("delay=", "delays"), ("irq-delay=", "delays"), ("drop", "lost"),
                  ("irq=", "lost"), ("complete=", "completion"), ("lie", "lies"),
                  ("corrupt", "lies"), ("set-state=", "state"))


def action_words(rule_text):
    """[(action word as a feature, class)] of a rule's text: `error=eio` is
    kept whole, `delay=exp(1ms)` becomes `delay` (its distribution is an
    input, not a behaviour)."""
    out = []
    for word in rule_text.split()[1:]:
        for prefix, cls in ACTION_CLASSES:
            if word == prefix or prefix.endswith("=") and word.startswith(prefix):
                keep_value = prefix in ("error=", "complete=", "irq=")
                out.append((word if keep_value else prefix.rstrip("="), cls))
                break
    return out


def edge_hex(e):
    """An edge hash (an int, or hex text) as lower-case hex; None if it is neither."""
    if isinstance(e, int) and not isinstance(e, bool):
        return f"{e:x}"
    try:
        return f"{int(str(e), 16):x}"
    except ValueError:
        return None


def cover_edges(outcome):
    """The kcov edges of @outcome as hex: its `cover` field when the
    executor's Outcome has one (ints), and the `cover N HEX...` lines of its
    report (the same edges: a set holds each once)."""
    edges = {edge_hex(e) for e in (getattr(outcome, "cover", None) or ())}
    for line in outcome.report:
        words = line.split()
        if len(words) >= 2 and words[0] == "cover":
            edges.update(edge_hex(w) for w in words[2:])
    edges.discard(None)
    return edges


def relaxations(outcome):
    return {line.split()[1] for line in outcome.report
            if line.startswith("relaxed ") and len(line.split()) >= 2}


def device_features(faults, rules):
    """@faults: Outcome.faults ({program device: {injector, hits, io}});
    @rules: the program's rules ({device: [(name, text)]})."""
    out = set()
    for dev, f in faults.items():
        where = f.get("injector", dev)
        for op, n in (f.get("io") or {}).items():
            out.add(f"io:{where}:{op}:{bucket(n)}")
        injected = {}
        texts = dict(rules.get(dev, []))
        for name, hits in (f.get("hits") or {}).items():
            if not hits or name not in texts:
                continue
            op = texts[name].split()[0]
            for word, cls in action_words(texts[name]):
                injected[cls] = injected.get(cls, 0) + hits
                out.add(f"fired:{op}:{word}")
        for cls, n in injected.items():
            out.add(f"io:{where}:{cls}:{bucket(n)}")
    return out


def stat_features(stats):
    out = set()
    for key, value in stats.items():
        if IGNORED_DIAG.search(key):
            continue
        try:
            b = bucket(int(value))
        except (TypeError, ValueError):
            continue
        out.add(f"stat:{key}:{b}")
    return out


def features(outcome, rules):
    """The feature set of one program's Outcome; @rules as the program
    was sent ({device: [(name, text)]})."""
    return ({f"edge:{e}" for e in cover_edges(outcome)}
            | {f"relaxed:{r}" for r in relaxations(outcome)}
            | device_features(outcome.faults, rules)
            | stat_features(outcome.stats))


def edges(feats):
    """How many of @feats are kcov edges."""
    return sum(1 for f in feats if f.startswith("edge:"))
