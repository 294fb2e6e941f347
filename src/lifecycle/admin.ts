import type { FastifyInstance } from 'fastify'
import { sendAdminProblem } from '../admin/server.js'
import { ApiError, type FieldError } from '../contract/errors.js'
import { isoNow } from '../contract/timestamp.js'
import type { ReloadResult } from './reload.js'

// POST /admin/v1/config/reload on the admin port (docs/operations.md, "Changing the
// configuration"): a reload on demand. 200 with what is in force, `changed` false when the
// file is as it was; 422 VALIDATION_FAILED listing every reason when it is refused, the old
// configuration still serving.

export const RELOAD_PATH = '/admin/v1/config/reload'

/**
 * `<file> <path>: <message>` as a field error: the setting as the field, the rest as its detail.
 * A path holds no space, so a problem of no setting (`the new configuration could not be put in
 * force: …`) is the file's, not a field named by its first words.
 */
export function reasonOf(problem: string): FieldError {
  const match = /^(\S+) ([^:\s]+): (.+)$/.exec(problem)
  const restart = problem.includes(': needs a restart')
  if (match === null) return { field: 'CONFIG_FILE', code: 'INVALID_FORMAT', detail: problem }
  return { field: match[2] as string, code: restart ? 'NOT_ALLOWED' : 'INVALID_FORMAT', detail: match[3] as string }
}

export function reloadRoute(reload: (trigger: string) => Promise<ReloadResult>, docsUrl: string) {
  return {
    paths: RELOAD_PATH,
    routes: async (admin: FastifyInstance): Promise<void> => {
      admin.post(RELOAD_PATH, async (request, reply) => {
        const result = await reload('admin route')
        if (result.outcome === 'refused') {
          return sendAdminProblem(request, reply, new ApiError('VALIDATION_FAILED', `The configuration was not reloaded (${result.problems.length} reason${result.problems.length === 1 ? '' : 's'}); the one loaded at ${result.loadedAt} keeps serving.`, {
            errors: result.problems.map(reasonOf),
          }), docsUrl)
        }
        return reply.type('application/json; charset=utf-8').send({
          data: { changed: result.outcome === 'applied', hash: result.hash, loadedAt: result.loadedAt },
          meta: { requestId: request.id, timestamp: isoNow() },
        })
      })
    },
  }
}
