import { describe, expect, test } from 'vitest'
import { TendError } from '../../client/index.js'
import { detailInToolTerms, inToolTerms, parameterOfField, ToolFailure } from '../../tools/core/index.js'

describe('a refusal in the tool’s terms', () => {
  test('each request field is named as the parameter that sets it', () => {
    expect(parameterOfField('cwd')).toBe('cwd')
    expect(parameterOfField('timeoutMs')).toBe('timeout')
    expect(parameterOfField('name')).toBe('description')
    expect(parameterOfField('lifetime')).toBe('persistent')
    expect(parameterOfField('after/2')).toBe('after[2]')
    expect(parameterOfField('ready/timeoutMs')).toBe('ready.timeout_ms')
    expect(parameterOfField('memoryBytes')).toBe("memoryBytes (an operator's setting, not a parameter)")
  })

  test('every field of a detail is renamed, and the CLI advice for a cwd becomes the parameter to pass', () => {
    expect(detailInToolTerms('body/network: network allow needs a sandbox; body/port: x')).toBe('network: network allow needs a sandbox; port: x')
    expect(detailInToolTerms('ready.timeoutMs: too long')).toBe('ready.timeout_ms: too long')
    expect(detailInToolTerms('body/cwd: / is a system folder: choose a project folder, or sandbox off')).toBe(
      'cwd: / is a system folder: pass cwd: the absolute path of the project folder you work in',
    )
  })

  test('a validation refusal becomes a ToolFailure keeping its cause; any other error passes unchanged', async () => {
    const refusal = new TendError('TEND_ERR_VALIDATION', { detail: 'body/timeoutMs: expected a number' })
    const failure = await inToolTerms('the task was refused', undefined, () => Promise.reject(refusal)).catch((error: unknown) => error)
    expect(failure).toBeInstanceOf(ToolFailure)
    expect((failure as Error).message).toBe('the task was refused: timeout: expected a number')
    expect((failure as Error).cause).toBe(refusal)
    const other = new TendError('TEND_ERR_INVALID_TASK_ID', { id: 'x' })
    await expect(inToolTerms('the task was refused', undefined, () => Promise.reject(other))).rejects.toBe(other)
  })
})
