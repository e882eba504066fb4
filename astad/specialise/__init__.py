"""specialise"""
