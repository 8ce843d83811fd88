# Writes the small test files of package avroio with Debian's python3-avro:
#
#   /usr/bin/python3 gen.py
#
# events-<codec>.avro: 30 records of events.avsc, in 10 blocks of 2 to 4 records
# (the writer cuts a block once it holds at least 70 bytes), for codecs
# null, deflate, snappy, zstandard, bzip2 and xz (xz registered here around
# Python's lzma module, as python-avro has no writer for it; bzip2 at level 1,
# see below). Record i is a
# pure function of i; eventRecord in avroio's tests computes the same.
import bz2, lzma, os
import avro.schema, avro.datafile, avro.io, avro.codecs

class XzCodec(avro.codecs.Codec):
    @staticmethod
    def compress(data):
        c = lzma.compress(data, format=lzma.FORMAT_XZ, check=lzma.CHECK_CRC64)
        return c, len(c)
    @staticmethod
    def decompress(readers_decoder):
        raise NotImplementedError
avro.codecs.KNOWN_CODECS["xz"] = XzCodec

# bzip2 at level 1 (100k blocks) instead of python-avro's level 9: Go's
# bzip2 reader allocates a table of the level's block size (3.6 MB at level 9)
# for every Avro block it inflates, which would dominate the split checks.
class Bzip2Level1Codec(avro.codecs.Codec):
    @staticmethod
    def compress(data):
        c = bz2.compress(data, 1)
        return c, len(c)
    @staticmethod
    def decompress(readers_decoder):
        raise NotImplementedError
avro.codecs.KNOWN_CODECS["bzip2"] = Bzip2Level1Codec

here = os.path.dirname(os.path.abspath(__file__))
schema = avro.schema.parse(open(os.path.join(here, "events.avsc")).read())
avro.datafile.SYNC_INTERVAL = 70
for codec in ["null", "deflate", "snappy", "zstandard", "bzip2", "xz"]:
    out = os.path.join(here, "events-%s.avro" % codec)
    w = avro.datafile.DataFileWriter(open(out, "wb"), avro.io.DatumWriter(), schema, codec=codec)
    for i in range(30):
        w.append({
            "id": i,
            "name": "ev-%d" % i,
            "score": i * 0.5,
            "tags": ["t%d" % j for j in range(i % 3)],
            "note": None if i % 4 == 0 else "n%d" % i,
            "kind": ["A", "B", "C"][i % 3],
        })
    w.close()
