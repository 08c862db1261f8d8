/**
 * The docs the example upstreams serve. Their templates overlap on purpose, so the routing rules are
 * visible: `/api/users/me` (literal) beats `/api/users/{id}`, `/files/{id}/meta` beats the catch-all
 * `/files/{+path}`, and the two catalog instances declare the same endpoints, so they are load balanced.
 *
 * Path parameters are declared by their bare identifier (`format` for `{.format}`, `id` for
 * `{id: [0-9]+}`), as services publish them; discovery and /spec take that form (docs/design.md, Discovery).
 */

const pathParam = (name: string, description: string) => ({ name, in: 'path', required: true, type: 'string', description });

export const usersDoc = {
  swagger: '2.0',
  info: { title: 'users', version: '1.0.0', description: 'Example users service (Swagger 2.0, basePath /api).' },
  basePath: '/api',
  consumes: ['application/json'],
  produces: ['application/json'],
  paths: {
    '/users': {
      get: {
        operationId: 'listUsers',
        summary: 'List users',
        parameters: [{ name: 'limit', in: 'query', type: 'integer', minimum: 1, description: 'Page size' }],
        responses: { 200: { description: 'Users', schema: { type: 'array', items: { $ref: '#/definitions/User' } } } },
      },
      post: {
        operationId: 'createUser',
        summary: 'Create a user',
        parameters: [{ name: 'body', in: 'body', required: true, schema: { $ref: '#/definitions/NewUser' } }],
        responses: { 201: { description: 'Created', schema: { $ref: '#/definitions/User' } }, 400: { $ref: '#/responses/BadRequest' } },
      },
    },
    '/users/me': {
      get: {
        operationId: 'getCurrentUser',
        summary: 'The calling user (a literal segment: beats /users/{id})',
        'x-disabled-listeners': ['accessLog'],
        responses: { 200: { description: 'The user', schema: { $ref: '#/definitions/User' } } },
      },
    },
    '/users/{id}': {
      parameters: [{ $ref: '#/parameters/UserId' }],
      get: {
        operationId: 'getUser',
        responses: { 200: { description: 'The user', schema: { $ref: '#/definitions/User' } }, 404: { $ref: '#/responses/NotFound' } },
      },
      put: {
        operationId: 'replaceUser',
        parameters: [{ name: 'body', in: 'body', required: true, schema: { $ref: '#/definitions/NewUser' } }],
        responses: { 200: { description: 'Replaced', schema: { $ref: '#/definitions/User' } } },
      },
      delete: { operationId: 'deleteUser', responses: { 204: { description: 'Deleted' } } },
    },
    '/users/{id}/avatar{.format}': {
      get: {
        operationId: 'getAvatar',
        summary: 'Avatar; the optional extension ({.format}) matches /avatar, /avatar.png, /avatar.jpg',
        parameters: [{ $ref: '#/parameters/UserId' }, pathParam('format', 'Optional extension, with its dot')],
        produces: ['application/json', 'image/png'],
        responses: { 200: { description: 'The avatar (the example answers JSON)' } },
      },
    },
    '/orders/{id: [0-9]+}': {
      get: {
        operationId: 'getOrder',
        summary: 'An order; the regex segment only matches digits',
        parameters: [pathParam('id', 'Order number (digits)')],
        responses: { 200: { description: 'The order', schema: { $ref: '#/definitions/Order' } } },
      },
    },
  },
  parameters: { UserId: pathParam('id', 'User id') },
  responses: {
    NotFound: { description: 'No such user', schema: { $ref: '#/definitions/Error' } },
    BadRequest: { description: 'Invalid user', schema: { $ref: '#/definitions/Error' } },
  },
  definitions: {
    User: {
      type: 'object',
      required: ['id', 'name'],
      properties: { id: { type: 'string' }, name: { type: 'string' }, email: { type: 'string', format: 'email' } },
    },
    NewUser: {
      type: 'object',
      required: ['name'],
      properties: { name: { type: 'string' }, email: { type: 'string', format: 'email' } },
    },
    Order: { type: 'object', properties: { id: { type: 'integer' }, owner: { $ref: '#/definitions/User' } } },
    Error: { type: 'object', properties: { message: { type: 'string' } } },
  },
};

export const filesDoc = {
  openapi: '3.0.3',
  info: { title: 'files', version: '1.0.0', description: 'Example files service (OpenAPI 3).' },
  servers: [{ url: '/' }],
  paths: {
    '/files/{+path}': {
      parameters: [{ name: 'path', in: 'path', required: true, schema: { type: 'string' }, description: 'Any path, slashes included' }],
      get: {
        operationId: 'readFile',
        summary: 'Catch-all: any path under /files not matched by something more specific',
        responses: { 200: { description: 'The file', content: { 'application/json': { schema: { $ref: '#/components/schemas/File' } } } } },
      },
      put: {
        operationId: 'writeFile',
        requestBody: { required: true, content: { 'application/octet-stream': { schema: { type: 'string', format: 'binary' } } } },
        responses: { 204: { description: 'Written' } },
      },
    },
    '/files/{id}/meta': {
      get: {
        operationId: 'getFileMeta',
        summary: 'Metadata (more specific than the catch-all)',
        parameters: [{ name: 'id', in: 'path', required: true, schema: { type: 'string' } }],
        responses: {
          200: { description: 'Metadata', content: { 'application/json': { schema: { $ref: '#/components/schemas/FileMeta' } } } },
        },
      },
    },
  },
  components: {
    schemas: {
      File: { type: 'object', properties: { path: { type: 'string' }, size: { type: 'integer' } } },
      FileMeta: {
        type: 'object',
        properties: { id: { type: 'string' }, owner: { $ref: '#/components/schemas/User' }, tags: { type: 'array', items: { type: 'string' } } },
      },
      User: { type: 'object', description: 'Not the users service\'s User: /spec keeps both apart', properties: { login: { type: 'string' } } },
    },
  },
};

/** Both catalog instances serve this doc: equivalent endpoints, load balanced by weight. */
export const catalogDoc = {
  swagger: '2.0',
  info: { title: 'catalog', version: '1.0.0', description: 'Example catalog service (two instances, same endpoints).' },
  basePath: '/api',
  produces: ['application/json'],
  paths: {
    '/products': {
      get: { operationId: 'listProducts', responses: { 200: { description: 'Products', schema: { type: 'array', items: { $ref: '#/definitions/Product' } } } } },
    },
    '/products/{id}': {
      get: {
        operationId: 'getProduct',
        parameters: [pathParam('id', 'Product id')],
        responses: { 200: { description: 'The product', schema: { $ref: '#/definitions/Product' } } },
      },
    },
  },
  definitions: {
    Product: { type: 'object', properties: { id: { type: 'string' }, name: { type: 'string' }, price: { type: 'number' } } },
  },
};
