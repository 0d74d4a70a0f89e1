/**
 * `text` cut to at most `max` UTF-16 code units, ending with `mark` (e.g. `…`) when it was cut.
 * The cut never falls between the two halves of a character outside the Basic Multilingual Plane
 * (an emoji): a lone half is not a character, and strict UTF-8 and JSON readers refuse it.
 */
export function cutText(text: string, max: number, mark = ''): string {
  if (text.length <= max) return text
  let end = Math.max(0, max - mark.length)
  const before = text.charCodeAt(end - 1)
  if (end > 0 && before >= 0xd800 && before <= 0xdbff) end -= 1
  return text.slice(0, end) + mark
}
