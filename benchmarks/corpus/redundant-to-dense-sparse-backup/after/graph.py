import torch


class GraphConv(torch.nn.Module):
    def __init__(self, adj, dim):
        super().__init__()
        self.adj = adj.coalesce()
        self.adj_backup = self.adj.to_dense()
        self.lin = torch.nn.Linear(dim, dim)

    def prune(self, threshold):
        a = self.adj
        keep = a.values().abs() > threshold
        self.adj = torch.sparse_coo_tensor(a.indices()[:, keep], a.values()[keep], a.shape).coalesce()

    def restore(self):
        self.adj = self.adj_backup.to_sparse().coalesce()

    def forward(self, x):
        return torch.sparse.mm(self.adj, self.lin(x))
