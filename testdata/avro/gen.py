#!/usr/bin/python3
"""Writes the taxi-trip Avro files that examples/avrostats reads.

Run with Debian's python3 and python3-avro (python3-snappy for the snappy file):
    /usr/bin/python3 testdata/avro/gen.py testdata/avro
"""
import datetime
import random
import sys

import avro.datafile
import avro.io
import avro.schema

# Blocks of about 8 kB instead of 64 kB, so that each small file holds many
# blocks (split points).
avro.datafile.SYNC_INTERVAL = 8000

SCHEMA = avro.schema.parse("""
{"type": "record", "name": "Trip", "namespace": "sdfio.examples", "fields": [
  {"name": "trip_id", "type": "long"},
  {"name": "vendor", "type": {"type": "enum", "name": "Vendor", "symbols": ["CMT", "VTS", "DDS"]}},
  {"name": "pickup", "type": {"type": "long", "logicalType": "timestamp-millis"}},
  {"name": "passengers", "type": "int"},
  {"name": "distance_km", "type": "double"},
  {"name": "fare", "type": "double"},
  {"name": "payment", "type": ["null", "string"]},
  {"name": "tags", "type": {"type": "array", "items": "string"}}
]}
""")


def main(out):
    rnd = random.Random(7)
    start = datetime.datetime(2026, 11, 1, tzinfo=datetime.timezone.utc)
    trip = 0
    for name, codec in (("trips-1.avro", "deflate"), ("trips-2.avro", "snappy"), ("trips-3.avro", "null")):
        with open(f"{out}/{name}", "wb") as f:
            w = avro.datafile.DataFileWriter(f, avro.io.DatumWriter(), SCHEMA, codec=codec)
            for _ in range(4000):
                trip += 1
                km = round(rnd.expovariate(1 / 6.0), 2)
                w.append({
                    "trip_id": trip,
                    "vendor": rnd.choice(["CMT", "VTS", "DDS"]),
                    "pickup": start + datetime.timedelta(seconds=rnd.randrange(30 * 86400)),
                    "passengers": rnd.choice([1, 1, 1, 2, 2, 3, 4, 5]),
                    "distance_km": km,
                    "fare": round(3.5 + km * 1.9 + rnd.random() * 4, 2),
                    "payment": rnd.choice([None, "card", "card", "cash"]),
                    "tags": rnd.sample(["airport", "night", "shared", "toll", "accessible"], rnd.randrange(3)),
                })
            w.close()


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else ".")
