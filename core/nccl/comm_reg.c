/* comm_reg.c - buffer registrations of a pool communicator (comm_reg.h). */
#include "comm_reg.h"

#include <stdlib.h>

static int add(struct cxls_comm *c, void *buff, enum cxls_reg_kind kind)
{
	if (c->n_regs == c->cap_regs) {
		size_t cap = c->cap_regs ? 2 * c->cap_regs : 8;
		struct cxls_reg *regs = realloc(c->regs, cap * sizeof(*regs));

		if (!regs)
			return -1;
		c->regs = regs;
		c->cap_regs = cap;
	}
	c->regs[c->n_regs++] = (struct cxls_reg){ buff, kind };
	return 0;
}

int cxls_reg_add(struct cxls_comm *c, void *buff, enum cxls_reg_kind kind)
{
	int r;

	pthread_mutex_lock(&c->reg_lock);
	r = add(c, buff, kind);
	pthread_mutex_unlock(&c->reg_lock);
	return r;
}

int cxls_reg_remove(struct cxls_comm *c, void *handle, enum cxls_reg_kind kind)
{
	int r = -1;

	pthread_mutex_lock(&c->reg_lock);
	for (size_t i = c->n_regs; i-- > 0;)
		if (c->regs[i].buff == handle && c->regs[i].kind == kind) {
			c->regs[i] = c->regs[--c->n_regs];
			r = 0;
			break;
		}
	pthread_mutex_unlock(&c->reg_lock);
	return r;
}

void cxls_reg_clear(struct cxls_comm *c)
{
	pthread_mutex_lock(&c->reg_lock);
	free(c->regs);
	c->regs = NULL;
	c->n_regs = c->cap_regs = 0;
	pthread_mutex_unlock(&c->reg_lock);
}
