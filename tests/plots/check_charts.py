#!/usr/bin/env python3
"""Checks the charts `perfsim plot` wrote into a directory.

  check_charts.py DIR NAME=SERIES... [--absent NAME...]

For each NAME: DIR/NAME.svg parses as XML and holds SERIES groups whose id starts "series-"
(the plotting script gives every series such a gid; SERIES+ for at least that many), and DIR/NAME.png decodes to an image of
more than one colour. --absent names charts that must not have been written. No scratch folder
of the plotting script may be left behind. Exit 0 when every check holds, else 1 with one line
per failure.
"""
import os
import struct
import sys
import xml.etree.ElementTree as ET
import zlib


def png_colours(path):
    """Distinct colours of a PNG: through matplotlib or PIL when present, else decoded here."""
    try:
        import matplotlib.image
        import numpy
        img = matplotlib.image.imread(path)
        if img.dtype != numpy.uint8:
            img = numpy.round(img * 255).astype(numpy.uint8)
        if img.ndim == 2:
            img = img[:, :, None]
        # Each pixel's channels packed into one integer: unique over a flat array is fast.
        packed = numpy.zeros(img.shape[:2], dtype=numpy.uint32)
        for channel in range(img.shape[2]):
            packed = (packed << 8) | img[:, :, channel]
        return len(numpy.unique(packed)), img.shape[1], img.shape[0]
    except ImportError:
        pass
    try:
        from PIL import Image
        with Image.open(path) as im:
            return len(set(im.convert("RGBA").getdata())), im.width, im.height
    except ImportError:
        pass
    return decode_png(path)


def decode_png(path):
    """A plain 8-bit RGB or RGBA, non-interlaced PNG (what matplotlib's Agg writes)."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError("not a PNG signature")
    pos, idat, width = 8, [], None
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        if zlib.crc32(kind + body) & 0xFFFFFFFF != struct.unpack(">I", data[pos + 8 + length:pos + 12 + length])[0]:
            raise ValueError("bad CRC in chunk %r" % kind)
        if kind == b"IHDR":
            width, height, depth, colour, _, _, interlace = struct.unpack(">IIBBBBB", body)
            if depth != 8 or colour not in (2, 6) or interlace:
                raise ValueError("unsupported PNG layout (depth %d, colour type %d)" % (depth, colour))
            bpp = 4 if colour == 6 else 3
        elif kind == b"IDAT":
            idat.append(body)
        pos += 12 + length
    raw = zlib.decompress(b"".join(idat))
    stride = width * bpp
    prev = bytearray(stride)
    colours = set()
    for y in range(height):
        kind = raw[y * (stride + 1)]
        row = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = row[i - bpp] if i >= bpp else 0
            b = prev[i]
            c = prev[i - bpp] if i >= bpp else 0
            if kind == 1:
                row[i] = (row[i] + a) & 0xFF
            elif kind == 2:
                row[i] = (row[i] + b) & 0xFF
            elif kind == 3:
                row[i] = (row[i] + (a + b) // 2) & 0xFF
            elif kind == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                row[i] = (row[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 0xFF
        colours.update(bytes(row[i:i + bpp]) for i in range(0, stride, bpp))
        prev = row
    return len(colours), width, height


def check(directory, name, series, at_least=False):
    problems = []
    svg = os.path.join(directory, name + ".svg")
    png = os.path.join(directory, name + ".png")
    for path in (svg, png):
        if not os.path.isfile(path) or os.path.getsize(path) == 0:
            problems.append("%s: missing or empty" % path)
    if problems:
        return problems
    try:
        root = ET.parse(svg).getroot()
    except ET.ParseError as e:
        return ["%s: not XML: %s" % (svg, e)]
    ids = [el.get("id") for el in root.iter() if (el.get("id") or "").startswith("series-")]
    if len(ids) < series if at_least else len(ids) != series:
        problems.append("%s: %d series, expected %s%d (%s)" %
                        (svg, len(ids), "at least " if at_least else "", series, ", ".join(ids)))
    if len(set(ids)) != len(ids):
        problems.append("%s: series ids repeat (%s)" % (svg, ", ".join(ids)))
    try:
        colours, width, height = png_colours(png)
    except Exception as e:  # a PNG that does not decode, whatever the reader says
        return problems + ["%s: does not decode: %s" % (png, e)]
    if colours < 2:
        problems.append("%s: blank (%d colour)" % (png, colours))
    if width < 200 or height < 200:
        problems.append("%s: %dx%d pixels, too small for a chart" % (png, width, height))
    return problems


def main(argv):
    if len(argv) < 2:
        sys.stderr.write(__doc__)
        return 2
    directory, rest = argv[0], argv[1:]
    absent = []
    if "--absent" in rest:
        absent = rest[rest.index("--absent") + 1:]
        rest = rest[:rest.index("--absent")]
    problems = []
    for spec in rest:
        name, _, count = spec.partition("=")
        problems += check(directory, name, int(count.rstrip("+")), count.endswith("+"))
    for name in absent:
        for ext in (".svg", ".png"):
            if os.path.exists(os.path.join(directory, name + ext)):
                problems.append("%s%s: written, but the report has no data for it" % (name, ext))
    leftovers = [f for f in os.listdir(directory) if f.startswith(".perfsim-")]
    if leftovers:
        problems.append("%s: scratch left behind: %s" % (directory, ", ".join(leftovers)))
    for p in problems:
        print("FAIL  " + p)
    if not problems:
        print("ok    %s: %s" % (directory, ", ".join(rest) or "no charts"))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
