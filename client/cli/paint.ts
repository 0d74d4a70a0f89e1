/**
 * The CLI's own colours, marked so that nothing else can pass for them. Everything the CLI prints
 * as text has its control characters escaped (visibleText), a record's colour sequences too: an
 * allowed `ESC[30m` would still hide the rest of a line, black on black. tend's colours are written
 * as a mark that carries this process's random nonce, which no record, worker entry or error
 * message (all made before this process) can hold, and become sequences only after the escaping.
 */
// Math.random, not node:crypto (whose load every command would pay): V8 seeds it from the system's
// random source at each start, and nothing outside this process sees its values.
const MARK = `\uE000${Math.random().toString(36).slice(2, 12)}${Math.random().toString(36).slice(2, 12)}`
const MARKED = new RegExp(`${MARK}(\\d{1,2})\uE001`, 'g')

/** `text` in a colour (an SGR number: 31 red, 32 green …), reset after it. */
export function paintMarked(colour: number, text: string): string {
  return `${MARK}${colour}\uE001${text}${MARK}0\uE001`
}

/** The marks turned into the sequences they stand for; run after the text is made visible. */
export function unmarkPaint(text: string): string {
  return text.replace(MARKED, (_mark, colour: string) => `\u001b[${colour}m`)
}

/** How wide `text` shows: its marks take no room. */
export function shownWidth(text: string): number {
  return text.replace(MARKED, '').length
}
