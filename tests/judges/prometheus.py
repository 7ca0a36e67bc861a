"""prometheus-client (PyPI) judges the daemons' /metrics: it parses the exposition text with
Prometheus's own Python parser, and checks each histogram as Prometheus reads one (buckets
cumulative by le, the +Inf bucket equal to _count).

  python3 prometheus.py < TEXT   -> JSON: {"families": {name: type}, "samples": [{name, labels, value}]}
                                    exit 1 (with the reason on stderr) when the text does not parse
"""
import json
import math
import sys

from prometheus_client.parser import text_string_to_metric_families


def main():
    text = sys.stdin.read()
    families = {}
    samples = []
    try:
        for family in text_string_to_metric_families(text):
            families[family.name] = family.type
            buckets = {}
            counts = {}
            for sample in family.samples:
                samples.append({"name": sample.name, "labels": sample.labels, "value": sample.value})
                if family.type != "histogram":
                    continue
                key = tuple(sorted((k, v) for k, v in sample.labels.items() if k != "le"))
                if sample.name.endswith("_bucket"):
                    buckets.setdefault(key, []).append((float(sample.labels["le"]), sample.value))
                elif sample.name.endswith("_count"):
                    counts[key] = sample.value
            for key, series in buckets.items():
                values = [value for _, value in sorted(series)]
                if any(a > b for a, b in zip(values, values[1:])):
                    raise ValueError(f"{family.name} {key}: buckets are not cumulative: {values}")
                if not math.isinf(sorted(series)[-1][0]):
                    raise ValueError(f"{family.name} {key}: no +Inf bucket")
                if values[-1] != counts.get(key):
                    raise ValueError(f"{family.name} {key}: +Inf bucket {values[-1]} != _count {counts.get(key)}")
    except Exception as error:  # the parser raises ValueError, and others on malformed text
        print(f"not valid exposition text: {error}", file=sys.stderr)
        sys.exit(1)
    json.dump({"families": families, "samples": samples}, sys.stdout)


if __name__ == "__main__":
    main()
