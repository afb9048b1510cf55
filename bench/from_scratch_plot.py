"""The from-scratch study's figure: masked-LM loss and accuracy against pretraining steps, as a PNG.

Drawn with Pillow (matplotlib is not installed in the project's environment): two panels side by side,
the held-out points of each run joined by lines, the training loss of each log interval as a thin
line in the loss panel. No flags here.
"""

from PIL import Image, ImageDraw, ImageFont

COLORS = {"static": (31, 119, 180), "dynamic": (214, 39, 40), "dynamic-rt": (44, 160, 44)}
PANEL = (520, 360)  # width, height of one panel, pixels
MARGIN = (70, 40, 20, 50)  # left, top, right, bottom


def _ticks(low, high, count=5):
    step = (high - low) / (count - 1)
    return [low + i * step for i in range(count)]


def _panel(draw, origin, title, x_range, y_range, font):
    """Axes, ticks and title of one panel; returns the data -> pixel mapping."""
    left, top = origin[0] + MARGIN[0], origin[1] + MARGIN[1]
    right, bottom = origin[0] + PANEL[0] - MARGIN[2], origin[1] + PANEL[1] - MARGIN[3]

    def to_pixel(x, y):
        fx = (x - x_range[0]) / (x_range[1] - x_range[0])
        fy = (y - y_range[0]) / (y_range[1] - y_range[0])
        return left + fx * (right - left), bottom - fy * (bottom - top)

    draw.rectangle([left, top, right, bottom], outline=(0, 0, 0))
    draw.text((left, origin[1] + 12), title, fill=(0, 0, 0), font=font)
    for x in _ticks(*x_range):
        px, _ = to_pixel(x, y_range[0])
        draw.line([px, bottom, px, bottom + 5], fill=(0, 0, 0))
        draw.text((px - 12, bottom + 8), f"{x:.0f}", fill=(0, 0, 0), font=font)
    for y in _ticks(*y_range):
        _, py = to_pixel(x_range[0], y)
        draw.line([left - 5, py, left, py], fill=(0, 0, 0))
        draw.text((origin[0] + 8, py - 6), f"{y:.2f}", fill=(0, 0, 0), font=font)
    draw.text(((left + right) / 2 - 50, bottom + 26), "pretraining step", fill=(0, 0, 0), font=font)
    return to_pixel


def _series(draw, to_pixel, points, color, width, markers):
    pixels = [to_pixel(x, y) for x, y in points]
    if len(pixels) > 1:
        draw.line(pixels, fill=color, width=width)
    for px, py in pixels if markers else ():
        draw.ellipse([px - 4, py - 4, px + 4, py + 4], fill=color)


def _range(values, pad=0.05):
    low, high = min(values), max(values)
    spread = (high - low) or 1.0
    return low - pad * spread, high + pad * spread


def draw_curves(path, heldout, training):
    """Writes the PNG.

    Args:
      path: the PNG to write.
      heldout: {run: [(step, masked-LM loss, masked-LM accuracy)]} on the held-out text (a run of
        from_scratch_pretrain.RUNS).
      training: {run: [(step, masked-LM training loss)]}.
    """
    font = ImageFont.load_default()
    image = Image.new("RGB", (2 * PANEL[0], PANEL[1] + 30), "white")
    draw = ImageDraw.Draw(image)
    steps = [s for rows in heldout.values() for s, _, _ in rows]
    x_range = (min(steps), max(steps))
    losses = [v for rows in heldout.values() for _, v, _ in rows]
    losses += [v for rows in training.values() for _, v in rows]
    loss_panel = _panel(
        draw,
        (0, 0),
        "masked-LM loss (dots: held-out; thin: training)",
        x_range,
        _range(losses),
        font,
    )
    accuracies = [a for rows in heldout.values() for _, _, a in rows]
    accuracy_panel = _panel(
        draw, (PANEL[0], 0), "held-out masked-LM accuracy", x_range, _range(accuracies), font
    )
    for run, rows in heldout.items():
        color = COLORS[run]
        _series(draw, loss_panel, training.get(run, []), color, 1, markers=False)
        _series(draw, loss_panel, [(s, v) for s, v, _ in rows], color, 2, markers=True)
        _series(draw, accuracy_panel, [(s, a) for s, _, a in rows], color, 2, markers=True)
    for k, run in enumerate(heldout):
        x = MARGIN[0] + 200 * k
        draw.rectangle([x, PANEL[1] + 8, x + 14, PANEL[1] + 22], fill=COLORS[run])
        label = f"{run} masking" if run in ("static", "dynamic") else "dynamic, + Rotten Tomatoes"
        draw.text((x + 20, PANEL[1] + 8), label, fill=(0, 0, 0), font=font)
    image.save(path, format="PNG")
    return path
