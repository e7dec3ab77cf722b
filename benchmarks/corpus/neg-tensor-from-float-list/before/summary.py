import statistics


def summarize(losses):
    return statistics.mean(losses), statistics.pstdev(losses)
