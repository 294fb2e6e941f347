// Node keeps the first of a repeated Host, Authorization and a few others, and joins repeats of
// most headers into one value: only the raw head tells how many lines a request sent of one.

/** How many lines of the header `name` (lower case) the request's head has. */
export function headerLines(rawHeaders: readonly string[], name: string): number {
  let lines = 0
  for (let i = 0; i < rawHeaders.length; i += 2) {
    const line = rawHeaders[i] as string
    if (line.length === name.length && line.toLowerCase() === name) lines += 1
  }
  return lines
}
