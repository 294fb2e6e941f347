// What a reload may change (docs/operations.md, "Changing the configuration"). Each
// capability's folder says it of its own section of the file, beside its schema: a setting is
// a whole section (`brands`) or one field of one (`events.types`), and it is either reloadable,
// with when the change holds, or restart-only, with why. src/config.ts composes them; the
// reloader (src/lifecycle/reload.ts) refuses a change of anything not reloadable, and the table
// in docs/operations.md is generated from the same rules.

export interface ReloadRules {
  /** Settings a reload changes, each with what then uses the new value. */
  reloadable: Readonly<Record<string, string>>
  /** Settings only a restart changes, each with why. */
  restartOnly: Readonly<Record<string, string>>
}

/** One set of rules from the capabilities'; a setting named twice is a mistake of the code. */
export function composeRules(...parts: ReloadRules[]): ReloadRules {
  const reloadable: Record<string, string> = {}
  const restartOnly: Record<string, string> = {}
  for (const part of parts) {
    for (const [setting, when] of Object.entries(part.reloadable)) {
      if (setting in reloadable || setting in restartOnly) throw new Error(`reload rules: ${setting} is named twice`)
      reloadable[setting] = when
    }
    for (const [setting, why] of Object.entries(part.restartOnly)) {
      if (setting in reloadable || setting in restartOnly) throw new Error(`reload rules: ${setting} is named twice`)
      restartOnly[setting] = why
    }
  }
  return { reloadable, restartOnly }
}

/**
 * The file's settings as the rules name them: a section whose fields the rules name one by one
 * is split into them (`events.types`, `events.retentionDays`), any other is one setting.
 */
export function settingsOf(file: Record<string, unknown>, sections: readonly string[], rules: ReloadRules): Record<string, unknown> {
  const named = [...Object.keys(rules.reloadable), ...Object.keys(rules.restartOnly)]
  const settings: Record<string, unknown> = {}
  for (const section of sections) {
    const value = file[section]
    const split = named.some((setting) => setting.startsWith(`${section}.`))
    if (split && typeof value === 'object' && value !== null && !Array.isArray(value)) {
      for (const [field, inner] of Object.entries(value)) settings[`${section}.${field}`] = inner
    } else settings[section] = value
  }
  return settings
}
