/** Variables a sandboxed task inherits from the daemon; everything else must be passed with --env. */
export const ENVIRONMENT_ALLOWLIST = ['PATH', 'HOME', 'USER', 'LOGNAME', 'SHELL', 'LANG', 'LANGUAGE', 'TZ', 'TERM'] as const

/** The allowlisted part of the daemon's environment, the task's own additions, and its marker. */
export function sandboxEnvironment(
  baseEnv: Readonly<Record<string, string>>,
  additions: Record<string, string>,
  marker: Record<string, string>,
): Record<string, string> {
  const env: Record<string, string> = {}
  for (const key of ENVIRONMENT_ALLOWLIST) if (baseEnv[key] !== undefined) env[key] = baseEnv[key]
  for (const [key, value] of Object.entries(baseEnv)) if (key.startsWith('LC_')) env[key] = value
  env.TMPDIR = '/tmp'
  return { ...env, ...additions, ...marker }
}

/**
 * What every task's environment starts with, under the daemon's and its own variables: settings
 * that make common tools write their output as they go (the spool file is not a terminal).
 */
export function taskDefaultEnvironment(settings: { pythonUnbuffered: boolean }): Record<string, string> {
  return settings.pythonUnbuffered ? { PYTHONUNBUFFERED: '1' } : {}
}
