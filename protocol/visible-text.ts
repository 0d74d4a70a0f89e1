/**
 * Text made safe for a terminal: what the CLI prints, and the start's warnings (which quote the
 * submitter's paths) before a record keeps them. Records, warnings, worker
 * entries and error messages carry text that whoever started a task chose (a prompt injection away
 * from hostile), or that any writer of a cluster's Redis put there: a control sequence among it
 * would set the terminal's title, write its clipboard (OSC 52), clear the screen or conceal the
 * rest of a question (`kill --all`). Every control character but a newline and a tab, and the
 * bidirectional overrides that reorder what is shown, is printed as a visible `\uXXXX` escape (the
 * same as JSON's, so a JSON document stays valid). Only the CLI's own colours pass: a foreground
 * colour or a reset (`ESC [ 3N m`, `ESC [ 0 m`), which cannot hide, move or send anything.
 */

/** The colours the CLI paints with (paintState): nothing else of ESC passes. */
const OWN_COLOUR = /^\u001b\[(?:0|3[0-7])m/

const SHOWN_AS_ESCAPE = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069]/g

export function visibleText(text: string): string {
  return text.replace(SHOWN_AS_ESCAPE, (character, offset: number) =>
    character === '\u001b' && OWN_COLOUR.test(text.slice(offset, offset + 5)) ? character : `\\u${character.charCodeAt(0).toString(16).padStart(4, '0')}`,
  )
}
