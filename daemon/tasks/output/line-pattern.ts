import { RE2JS } from 're2js'
import { cutText, TendError } from '../../../protocol/index.js'

/** The longest line a pattern is tried on: longer lines are tried on their first this-many characters. */
export const PATTERN_LINE_MAX = 64 * 1024

/** A pattern an agent gave, matched line by line in linear time (RE2): neither the pattern nor the output can stall the daemon. */
export interface LinePattern {
  readonly source: string
  matches(line: string): boolean
}

/**
 * Compiles a pattern from a request; TEND_ERR_VALIDATION naming `field` and what is wrong with it
 * (RE2 syntax: no backreferences or lookaround).
 */
export function compileLinePattern(source: string, field: string): LinePattern {
  let compiled: RE2JS
  try {
    compiled = RE2JS.compile(source)
  } catch (error) {
    throw new TendError('TEND_ERR_VALIDATION', {
      detail: `${field}: not a regular expression tend can match (RE2 syntax, no backreferences or lookaround): ${(error as Error).message}`,
    })
  }
  return {
    source,
    matches: (line) => compiled.matcher(cutText(line, PATTERN_LINE_MAX)).find(),
  }
}
