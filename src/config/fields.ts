import { z } from 'zod'

// What every section of the configuration is written with (docs/architecture.md,
// "Configuration"): the common field types, how a section names a problem, and how an
// environment variable is read.

export const positiveInt = z.number().int().positive()

export const httpUrl = z.url({ protocol: /^https?$/, error: 'must be an http(s) URL' })

/** An optional http(s) URL from the environment. */
export const optionalUrl = z.url({ protocol: /^https?$/ }).optional()

/** A TCP port from the environment. */
export const port = z.coerce.number().int().min(0).max(65535)

/** Milliseconds from the environment. */
export const milliseconds = z.coerce.number().int().min(1)

export const positiveIntText = z.coerce.number().int().positive()

/**
 * The fields a section's schema gives the file: the checks across them run once the whole file
 * parsed, and name each bad field by its path from the top of the file (`routes[2].upstream`).
 */
export type SectionFields<Shape extends z.ZodRawShape> = z.infer<z.ZodObject<Shape>>

/** A section's checks across its own fields (zod's `superRefine` context). */
export type SectionCheck<Shape extends z.ZodRawShape> = (fields: SectionFields<Shape>, ctx: z.RefinementCtx) => void

// An empty variable counts as unset, as shells and compose files often leave them.
export function readEnv(env: NodeJS.ProcessEnv, name: string): string | undefined {
  return env[name] === '' ? undefined : env[name]
}

/** `<source> <path>: <message>` for each issue, the path as a reader writes it (`routes[0].path`). */
export function describeIssues(source: string, error: z.ZodError): string[] {
  return error.issues.map((entry) => {
    const path = entry.path.reduce<string>((acc, part) =>
      typeof part === 'number' ? `${acc}[${part}]` : acc === '' ? String(part) : `${acc}.${String(part)}`, '')
    return `${source}${path === '' ? '' : ` ${path}`}: ${entry.message}`
  })
}
