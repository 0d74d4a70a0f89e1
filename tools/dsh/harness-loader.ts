import { createRequire } from 'node:module'
import { join, resolve } from 'node:path'
import { pathToFileURL } from 'node:url'
import type { HarnessHelpers } from './host-types.js'

const TOOLS_PACKAGE = '@deepseek-ai/dsh-tools'
const LLM_PACKAGE = '@deepseek-ai/dsh-llm'

/** A harness package tend could not load; says where it looked. */
export class HarnessNotFoundError extends Error {
  override readonly name = 'HarnessNotFoundError'
}

/**
 * Loads `defineTool` and `createUserMessage` from the harness the host runs. tend does not depend
 * on the harness: where it is installed beside tend (the usual case) a plain import finds it;
 * `from` names another folder to resolve it from (a linked or global tend install), and the
 * working directory is tried last.
 */
export async function loadHarness(from?: string): Promise<HarnessHelpers> {
  const [tools, llm] = await Promise.all([importHostPackage(TOOLS_PACKAGE, from), importHostPackage(LLM_PACKAGE, from)])
  if (typeof tools.defineTool !== 'function') throw new HarnessNotFoundError(`${TOOLS_PACKAGE} does not export defineTool; tend needs the 0.1.0-rc.8 line`)
  if (typeof llm.createUserMessage !== 'function')
    throw new HarnessNotFoundError(`${LLM_PACKAGE} does not export createUserMessage; tend needs the 0.1.0-rc.8 line`)
  return { defineTool: tools.defineTool, createUserMessage: llm.createUserMessage } as HarnessHelpers
}

async function importHostPackage(specifier: string, from: string | undefined): Promise<Record<string, unknown>> {
  const places = from === undefined ? ['tend', process.cwd()] : [from]
  const failures: string[] = []
  for (const place of places) {
    try {
      if (place === 'tend') return (await import(specifier)) as Record<string, unknown>
      const resolved = createRequire(join(resolve(place), 'package.json')).resolve(specifier)
      return (await import(pathToFileURL(resolved).href)) as Record<string, unknown>
    } catch (error) {
      failures.push(`${place === 'tend' ? 'beside tend' : place}: ${(error as Error).message.split('\n')[0]}`)
    }
  }
  throw new HarnessNotFoundError(`cannot load ${specifier} (install the harness packages beside tend, or set the plugin's harnessFrom): ${failures.join('; ')}`)
}
