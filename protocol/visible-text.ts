/**
 * Text made safe for a terminal: what the CLI prints, and the start's warnings (which quote the
 * submitter's paths) before a record keeps them. Records, warnings, worker entries and error
 * messages carry text that whoever started a task chose (a prompt injection away from hostile), or
 * that any writer of a cluster's Redis put there: a control sequence among it would set the
 * terminal's title, write its clipboard (OSC 52), clear the screen, or hide the rest of a question
 * (`kill --all`) by concealing it or colouring it black on black. Every control character but a
 * newline and a tab, the line separators, the direction marks and overrides that reorder what is
 * shown, and the invisible spaces (a name that looks like another's), is printed as a
 * visible `\uXXXX` escape (the same as JSON's, so a JSON document stays valid). The CLI's own
 * colours are added after this (client/cli/paint.ts).
 */

const SHOWN_AS_ESCAPE = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u061c\u200b\u200e\u200f\u2028-\u202e\u2060-\u2064\u2066-\u2069\ufeff]/g

/** A line break or a tab too: for a value shown on one line (a table's cell, a field), where a newline would forge a row. */
const SHOWN_AS_ESCAPE_ON_ONE_LINE = /[\u0000-\u001f\u007f-\u009f\u061c\u200b\u200e\u200f\u2028-\u202e\u2060-\u2064\u2066-\u2069\ufeff]/g

const escaped = (character: string) => `\\u${character.charCodeAt(0).toString(16).padStart(4, '0')}`

export function visibleText(text: string): string {
  return text.replace(SHOWN_AS_ESCAPE, escaped)
}

/** visibleText for a value that must stay on its one line. */
export function visibleLine(text: string): string {
  return text.replace(SHOWN_AS_ESCAPE_ON_ONE_LINE, escaped)
}
