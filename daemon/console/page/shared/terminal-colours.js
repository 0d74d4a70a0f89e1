// ansi_up as the output needs it: colours as classes, so that the page's palette (per theme,
// terminal-colours.css) decides how they look, and reverse video (SGR 7), which ansi_up ignores,
// shown as a terminal shows it: foreground and background swapped.

import { AnsiUp } from '/console/vendor/ansi_up.js'

/** The default colours, swapped: classes ansi-reverse-fg and ansi-reverse-bg. */
const SWAPPED_DEFAULT = { rgb: [0, 0, 0], class_name: 'ansi-reverse' }

export class TerminalAnsi extends AnsiUp {
  constructor() {
    super()
    this.use_classes = true
    this.reverse = false
  }

  /** Follows 7 (reverse), 27 (not reversed) and 0 (reset) in one SGR sequence; ansi_up does the rest. */
  process_ansi(packet) {
    const codes = packet.text.split(';')
    for (let i = 0; i < codes.length; i++) {
      const code = codes[i] === '' ? 0 : Number.parseInt(codes[i], 10)
      if (code === 0 || code === 27) this.reverse = false
      else if (code === 7) this.reverse = true
      // 38;5;N and 48;5;N, 38;2;R;G;B and 48;2;R;G;B: their numbers are not codes.
      else if (code === 38 || code === 48) i += codes[i + 1] === '5' ? 2 : codes[i + 1] === '2' ? 4 : 0
    }
    super.process_ansi(packet)
  }

  with_state(packet) {
    const state = super.with_state(packet)
    if (this.reverse) {
      const { fg, bg } = state
      state.fg = bg ?? SWAPPED_DEFAULT
      state.bg = fg ?? SWAPPED_DEFAULT
    }
    return state
  }
}
