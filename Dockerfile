# syntax=docker/dockerfile:1
# The gateway image: built in one stage, run from a second with production dependencies
# only, as the unprivileged `node` user. The same image runs the stand-in PMS and the key
# tool (see docker-compose.yml).

FROM node:24-bookworm-slim AS build
WORKDIR /app
COPY package.json package-lock.json ./
# Scripts off: `prepare` builds, and the sources are not here yet.
RUN npm ci --ignore-scripts --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
COPY src ./src
COPY mocks ./mocks
COPY scripts ./scripts
COPY bench ./bench
RUN npm run build

FROM node:24-bookworm-slim AS runtime
# Both listeners bind every interface *inside* the container: a published port reaches the
# container's own interface, never its loopback. Who can reach the admin port is decided
# where it is published (compose: host loopback only) and by ADMIN_TOKEN.
ENV NODE_ENV=production \
    HOST=0.0.0.0 \
    ADMIN_HOST=0.0.0.0
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --ignore-scripts --no-audit --no-fund && npm cache clean --force
COPY --from=build /app/dist ./dist
COPY config ./config
# No NODE_OPTIONS: --max-semi-space-size=64 was measured against the default (npm run bench,
# docs/performance.md, "Node options") and cost 80-90 MiB more resident memory for no CPU gain beyond noise.
USER node
# Only the public port: `docker run -P` must not publish the admin port on every host interface.
EXPOSE 3000
HEALTHCHECK --interval=10s --timeout=3s --start-period=10s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:' + (process.env.PORT || 3000) + '/v1/health').then((r) => process.exit(r.ok ? 0 : 1), () => process.exit(1))"]
# node, not npm, as PID 1's child: SIGTERM reaches the gateway, which drains and exits 0.
CMD ["node", "dist/src/server.js"]
