/** A plugin's entities: the directory (declared plus runtime, kept fresh across processes), its admin API, paging. */
export { EntityDirectory, type RemovedListener } from '../toolkit/entity-directory.ts';
export { entityAdminRoutes } from '../toolkit/entity-admin.ts';
export { page, pageSize } from '../toolkit/paging.ts';
