import { z } from 'zod'
import { port } from '../config/fields.js'

// The admin listener's section of the configuration (docs/architecture.md, "Configuration"):
// the environment alone sets it, never the file.

export const adminEnvFields = {
  ADMIN_PORT: port.default(9464).describe('Admin listener port: metrics and status'),
  ADMIN_HOST: z.string().min(1).default('127.0.0.1').describe('Admin bind address'),
  ADMIN_TOKEN: z.string().min(16, 'must be at least 16 characters').optional().describe('When set, the admin routes need `Authorization: Bearer <ADMIN_TOKEN>`'),
}
